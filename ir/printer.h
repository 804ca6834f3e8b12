// The canonical IR text. One line per node:
//   %0 = arg {index=0} : f32[64,100]
//   %1 = param {index=0, name="w1"} : cuda:f32[100]      (cuda:1:f32[...] on device 1)
//   %3 = add %1, %2 : f32[64,100]
//   %4 = sum %3 {dims=[1], keepdim=0} : f32[64]  @ mlp.cpp:12
//   %5, %6 = custom %4 {fn=3} : f32[64], f32[64]
// then `return %4, %6` (or a bare `return`), then one `update 0 = %7` line per
// parameter update (0 is the param's index attribute). Values are numbered by a
// running value count, not node ids; the parser renumbers. Attribute ints print
// without a '.', floats always with '.', 'e', "nan" or "inf" (exactly), strings
// quoted with \" \\ \n \t \xHH escapes. CPU is the implicit device.
// Printing then parsing gives back the same graph, and printing that gives the same text
// (one caveat: an empty float list prints as "[]" and reads back as an empty int list).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct PrintOptions {
  bool locations = false;  // append "  @ file:line"
};

std::string print_graph(const Graph& g, const PrintOptions& opts = {});
/// One node's line, without the trailing newline.
std::string print_node(const Graph& g, NodeId id, const PrintOptions& opts = {});
/// The printed value number of each node's result 0 (%N in the text), by node id;
/// result r of node n is %(numbers[n] + r). Other printers (ir/dot.h) name values alike.
std::vector<uint32_t> value_numbers(const Graph& g);

}  // namespace kiln
