// Fusion grouping: which nodes of a graph become one kernel. Chains of
// elementwise ops, broadcasts and views fuse into one group; elementwise
// producers fuse into a reduction's input; row-wise reduce-then-map patterns
// (softmax, log_softmax, mean/var normalisation) fuse into one group where the
// reductions share the group's row space; elementwise epilogues fuse after a
// matmul. With fusion off every op is its own group (the unfused baseline).
//
// What a group guarantees to the code generator:
// - Elementwise / Copy: every output has the shape S (the iteration space) or
//   S's size (a reshape of it, written at S's linear index). Members are elementwise ops, movement ops, `arange` and constants.
//   Each member is evaluated at one index map from S (never at two different
//   ones); a member smaller than S that a broadcast recomputes is a cheap op
//   (no exp/log/sqrt/rsqrt/sin/cos/tanh/sigmoid/gelu/pow/div) with a single
//   consumer. Copy groups hold movement ops only.
// - Reduction: every reduction reads a value of one shape S and reduces the same
//   dims R (keepdim may differ). The other members are evaluated per point of S
//   or once per row (a point of S with R removed: shapes S with R set to 1, or
//   with R dropped), or are cheap broadcast producers as above. Reductions may
//   feed each other through row values broadcast back over R (softmax's max,
//   then sum of exp(x - max)). Outputs have shape S or a row shape.
// - Matmul: nodes[0] is the only matmul; its operands are inputs (dense
//   buffers) and its result is read only inside the group, at the same index,
//   unless it is returned or a parameter update (then it is an output too,
//   written by the library call into that buffer); the rest is an epilogue
//   over the matmul's result shape, which every output has (or its size, as
//   above).
// - Opaque: one custom, check, sort or literal node. A literal is
//   materialised once by its own group and read by others as an input; a check
//   or a sort becomes a plan step of its own (a host step, a library call).
// - `constant` nodes (one value, any shape) are members of every group that
//   computes with them; one read as a buffer (by a matmul or custom call) or
//   returned also has an Elementwise group of its own that writes it.
// A group has at most kMaxFusionGroupNodes nodes besides its constants.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

enum class GroupKind : uint8_t {
  Elementwise,  // elementwise ops, views and scalar constants over one iteration shape
  Reduction,    // one or more reductions over the same reduced dims, with producers and epilogue
  Matmul,       // nodes[0] is a matmul; the rest is an elementwise epilogue on its result
  Copy,         // movement ops only, that must materialise (e.g. a transpose feeding a matmul)
  Opaque,       // a node no backend fuses (custom calls, checks, sorts, creation ops with randomness)
  Scatter,      // one scatter_add with its operands' producers, each output column on one thread
  Scan,         // one scan (cumsum, ...) with its operand's producers, each line on one thread
};

const char* group_kind_name(GroupKind k);

/// The most non-constant nodes in one group: bounds kernel size, compile time,
/// and the cost of planning (each merge is checked on the whole merged group).
inline constexpr size_t kMaxFusionGroupNodes = 256;

struct FusionGroup {
  GroupKind kind = GroupKind::Elementwise;
  /// Member nodes in topological order. `constant` nodes used by the group are
  /// members (recomputed in each kernel that uses them), never inputs, except
  /// where a matmul or custom call reads one as a buffer.
  std::vector<NodeId> nodes;
  /// Values read from outside the group (graph inputs or other groups' outputs), in first-use
  /// order.
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

/// The source line of the group's first node that has one (an error about the
/// group's kernel names it), or an unknown location.
SourceLoc first_loc(const Graph& g, const FusionGroup& group);

/// Human-readable listing of groups for dumps ("group 2 (reduction): %4 %5 %6 <- %1 -> %6").
std::string fusion_plan_str(const Graph& g, const std::vector<FusionGroup>& groups);

}  // namespace kiln
