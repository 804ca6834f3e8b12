// Graphviz pictures of a graph: the dumps' traced.dot, optimized.dot and
// fused.dot (frontend/dump.h), and `kiln explain --dot`. The picture printer
// beside the text printer (ir/printer.h): values are named as the text names
// them (%N), so a node in the picture is found in the .kir file by its name.
//
// Each node is a box labelled with its value name and op, its short attributes,
// its result type and the user's source line; arguments and parameters are
// ellipses, constants are small plain text drawn once per user (a constant used
// everywhere would otherwise pull an edge across the whole picture). The graph's
// outputs and parameter updates end in a `return` node.
//
// Clusters (a fused graph's kernels) are drawn as boxes around their nodes,
// labelled with the kernel's name and what it costs; an edge that leaves a
// cluster is a buffer in memory and is labelled with its type. A cluster with
// more than `collapse_above` nodes is drawn as one node listing its ops, and
// the picture's title says how many were collapsed. A computed node in no
// cluster (a view a kernel reads in place) has a dashed border. A node listed by several
// clusters is drawn in the first; a cluster whose nodes are all drawn elsewhere
// (a collective's wait step) is one node naming the step.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

/// A group of nodes drawn together: a kernel of a fused graph.
struct DotCluster {
  std::string name;    // the first label line ("k3_reduction_sum_exp")
  std::string detail;  // further label lines ("reads 4 KiB, writes 256 B; 1.0k flops")
  std::vector<NodeId> nodes;
};

struct DotOptions {
  std::string title;  // the picture's label
  std::vector<DotCluster> clusters;
  /// A cluster with more nodes than this (constants not counted) is drawn as one node.
  size_t collapse_above = 24;
};

/// The graph in Graphviz's dot language.
std::string graph_dot(const Graph& g, const DotOptions& opts = {});

}  // namespace kiln
