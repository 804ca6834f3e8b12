// The canonical IR text. One line per node:
//   %3 = add %1, %2 : f32[64,100]
//   %4 = sum %3 {dims=[1], keepdim=0} : f32[64]  @ mlp.cpp:12
// then `return %4` (and `update param0 = %7` lines for parameter updates).
// Printing then parsing gives back the same graph, and printing that gives the same text.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln {

struct PrintOptions {
  bool locations = false;  // append "  @ file:line"
};

std::string print_graph(const Graph& g, const PrintOptions& opts = {});
/// One node's line, without the trailing newline.
std::string print_node(const Graph& g, NodeId id, const PrintOptions& opts = {});

}  // namespace kiln
