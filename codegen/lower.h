// Lowering: one fusion group -> one kernel in the backend-neutral kernel IR.
//
// Elementwise and Copy groups become one loop over the output's elements: a
// flat loop on the linear index when every access is at the same element, or
// rows x an inner loop over the last dim when broadcasts or views need
// per-dim coordinates (so the inner loop stays contiguous and vectorises). A
// last dim that a reshape in the group splits (im2col's [.., kH kW, H' W'] from
// [.., kH, kW, H', W']) becomes nested loops, one per piece, so the reshape's
// coordinates fold from the loop variables instead of dividing per element.
// Movement ops inside a group compose into index maps; pad reads zero outside
// the copied range through a select. Reduction groups loop over the kept
// ("row") elements; each reduction gets an inner loop and an accumulator, and
// elementwise epilogues and full-size outputs (softmax's last map) get one
// more inner loop. Matmul groups compute only the epilogue: the matmul's
// result is the kernel's first input buffer.
#pragma once

#include <utility>
#include <vector>

#include "codegen/kernel_info.h"
#include "codegen/kernel_ir.h"
#include "ir/graph.h"
#include "passes/fusion.h"

namespace kiln {

struct LowerOptions {
  /// Matmul groups only: write the first epilogue output into the matmul's
  /// result buffer (see CpuCompileOptions::epilogue_in_place).
  bool epilogue_in_place = false;
  /// Reduction groups: a lone sum/max/min over leading dims whose result is the
  /// group's only output walks blocks of contiguous kept columns, folding row
  /// after row into the output block (the CPU vectorises along the block;
  /// without it, each output element strides down its column). A GPU keeps a
  /// block of threads per output element instead.
  bool column_reductions = false;
};

/// Lowers `group` of `g`. Buffers are the group's inputs that the kernel reads
/// (for Matmul groups the matmul's result first) followed by its outputs; each
/// Buffer records its graph value. A group with nothing to compute (a lone
/// matmul) gives a kernel with no output buffers and an empty body. Throws
/// kiln::Error naming the group's first source line when the group cannot be
/// lowered (opaque groups, random ops, reductions used at another row).
kir::Kernel lower_group(const Graph& g, const FusionGroup& group, const LowerOptions& opts = {});

/// Whether kernel k reads buffer `in` only at the element it stores output buffer
/// `out` to (one store, every load of `in` at that index). lower_group requires it
/// of every output it stores in place (Buffer::alias).
bool reads_only_where_written(const kir::Kernel& k, int32_t out, int32_t in);

/// Lowering's answer to the schedule's in_place step (Schedule::overwritable):
/// the (output, input) pairs of group `group` whose output its kernel `k`
/// (lower_group's) may store over the input. The group is elementwise or a
/// matmul epilogue, the output has its input's dtype and size, and k reads the
/// input only at the element it stores the output to (reads_only_where_written).
std::vector<std::pair<Value, Value>> overwritable(const FusionGroup& group, const kir::Kernel& k);

/// Stores each pair's output over its input in k (Buffer::alias: the stores go
/// through the input's buffer, which the caller passes for both). Throws
/// kiln::Error unless each pair is one that overwritable(group, k) gives.
void store_in_place(kir::Kernel& k, const std::vector<std::pair<Value, Value>>& pairs);

/// What dumps report about the kernel lowered from `group`: name, nodes, user
/// source lines, range, grain, bytes moved and flops.
KernelInfo describe_kernel(const Graph& g, const FusionGroup& group, const kir::Kernel& k);

}  // namespace kiln
