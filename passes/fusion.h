// Fusion grouping: which nodes of a graph become one kernel. Chains of
// elementwise ops, broadcasts and views fuse into one group; elementwise
// producers fuse into a reduction's input; row-wise reduce-then-map patterns
// (softmax, log_softmax, mean/var normalisation) fuse into one group where the
// reductions share the group's row space; elementwise epilogues fuse after a
// matmul. With fusion off every op is its own group (the unfused baseline).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

enum class GroupKind : uint8_t {
  Elementwise,  // elementwise ops, views and scalar constants over one iteration shape
  Reduction,    // one or more reductions over the same reduced dims, with producers and epilogue
  Matmul,       // nodes[0] is a matmul; the rest is an elementwise epilogue on its result
  Copy,         // a lone movement op that must materialise (e.g. a transpose feeding a matmul)
  Opaque,       // a node no backend fuses (custom calls, creation ops with randomness)
};

const char* group_kind_name(GroupKind k);

struct FusionGroup {
  GroupKind kind = GroupKind::Elementwise;
  /// Member nodes in topological order. Scalar `constant` nodes used by the group
  /// are members (recomputed in each kernel that uses them), never inputs.
  std::vector<NodeId> nodes;
  /// Values read from outside the group (graph inputs or other groups' outputs), in first-use order.
  std::vector<Value> inputs;
  /// Values the group must write: used outside the group, graph outputs, or parameter updates.
  std::vector<Value> outputs;
};

struct FusionOptions {
  bool enabled = true;  // false: one group per non-input node
};

/// Groups in an order that respects dependencies. Every non-input node whose value
/// is needed belongs to exactly one group, except scalar constants, which may be
/// members of several. Input nodes (arg, param) belong to none.
std::vector<FusionGroup> plan_fusion(const Graph& g, const FusionOptions& opts = {});

/// Human-readable listing of groups for dumps ("group 2 (reduction): %4 %5 %6 <- %1 -> %6").
std::string fusion_plan_str(const Graph& g, const std::vector<FusionGroup>& groups);

}  // namespace kiln
