// Which loop of a kernel may write its output with streaming (non-temporal)
// stores, and how each value of that loop's body varies with its index: the
// facts the CPU backend (llvm_streamed_pass.cpp) needs to emit the loop's
// vector body itself, as LLVM's loop vectoriser will not widen a `!nontemporal`
// store that is aligned to its element only. Kernel IR in, the loop and its
// values' kinds out.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::kir {

/// How a value of a streamed loop's body varies with the loop's index.
enum class Lanes : uint8_t {
  outside,  // defined before the loop (the same in every iteration)
  uniform,  // defined in the loop, the same in every iteration: computed as a scalar
  linear,   // row offset + the index: an element index, used only by loads and the store
  varying,  // one value per element: a vector of lanes
};

/// The loop whose store may stream, and how each value of its body varies.
struct StreamedLoop {
  const Stmt* stmt = nullptr;  // the inner loop; null: the kernel's flat loop (i0)
  const std::vector<Stmt>* body = nullptr;
  int32_t var = -1;          // its loop variable
  int32_t buffer = -1;       // the output it streams
  std::vector<Lanes> lanes;  // by value id
};

/// The loop of k that writes one output once, at `row offset + its index`, from
/// lets and loads at such indices: the kernel's flat loop, or its last pass over
/// a row (layer norm's output pass). Not a loop with a reduction, a branch or an
/// inner loop; not one that uses its index as data, or computes sin, cos,
/// philox, an index division or an integer power on a whole vector (their CPU
/// code is scalar); not an output computed in place, of other than 4- or
/// 8-byte elements, read back anywhere in the kernel (softmax's: its lines are
/// in cache anyway), or of fewer than `min_bytes` bytes or a size known only at
/// run time (min_bytes 0: any size). nullopt when there is none.
std::optional<StreamedLoop> streamed_loop(const Kernel& k, int64_t min_bytes);

}  // namespace kiln::kir
