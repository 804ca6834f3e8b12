// Reference kernels: the definition of what every op means. Plain C++ over
// strided views: eager CPU mode runs them, constant folding runs them, and
// every compiled kernel (CPU or GPU) is tested against them. They handle
// broadcast (stride-0) and non-contiguous inputs, with fast paths for dense
// inputs that use all cores on large tensors.
#pragma once

#include <span>
#include <string_view>

#include "ir/attrs.h"
#include "ir/op.h"
#include "runtime/collective.h"
#include "runtime/storage.h"

namespace kiln {

/// Computes op `k` into `out`, a dense buffer of the op's result type (see
/// infer_type). `inputs` are the operands' views; their shapes are the
/// operands' shapes (broadcasting happens inside). For Creation ops, `inputs`
/// is empty and `out` gives the result shape. Check ops throw kiln::Error on a
/// bad value, else copy their operand. Not for Input or Custom ops.
void reference_kernel(OpKind k, const Attrs& attrs, std::span<const View> inputs, const View& out);

/// A collective node's call (runtime/collective.h) for an operand of type `in`;
/// throws kiln::Error when the node was recorded for another world size.
CollectiveCall collective_call(OpKind k, const Attrs& attrs, const TensorType& in);
/// Runs a collective node over host views (eager CPU ops, the interpreter).
void reference_collective(OpKind k, const Attrs& attrs, const View& in, const View& out);

/// Copies any strided view into a dense buffer of the same shape and dtype, or
/// casts while copying when dtypes differ.
void copy_to(const View& src, const View& dst);

/// check_index's test, shared by the reference kernel, both executors and eager
/// checks: throws kiln::Error "<op>: index 7 is out of range for size 5 (expected
/// 0 <= index < 5)" for the first element of `indices` (integer, any strides,
/// host memory) outside [0, high).
void check_indices(const View& indices, int64_t high, std::string_view op);
/// check_nonzero's test: throws kiln::Error "<op>: integer division by zero
/// (expected a divisor with no zero element)" when an element of `divisor` is 0.
void check_nonzero(const View& divisor, std::string_view op);
/// check_distribution's test: throws kiln::Error "<op>: expected finite weights
/// >= 0 ..." unless every row along the last dim is a distribution's weights
/// with at least `count` non-zero ones.
void check_distribution(const View& weights, int64_t count, std::string_view op);
/// The test of Check op `k` (check_index, check_nonzero, check_distribution) with its attributes,
/// as the reference kernel, both executors and the frontend's eager checks run it.
void check_values(OpKind k, const Attrs& attrs, const View& in);

/// The strided geometry of a movement op's result when it can be expressed as
/// a view of its input without copying (reshape of a compatible layout,
/// permute, expand, slice). Returns false when a copy is needed (reshape of a
/// non-viewable layout, pad).
struct ViewGeometry {
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements, relative to the input's element 0
};
bool view_geometry(OpKind k, const Attrs& attrs, const Shape& in_shape, const Strides& in_strides,
                   ViewGeometry* out);

/// The op table's philox (ir/ops.def): x = w0:w1, words 0 and 1 of the
/// Philox-4x32-10 block at counter (lo, hi, attempt, 0) of `counter` and key
/// (lo, hi) of `key`, word 0 in the high half.
uint64_t philox_bits(int64_t key, int64_t counter, uint32_t attempt = 0);
/// The top 24 bits of philox_bits(key, counter) as a float in [0, 1): an f32 draw.
float philox_uniform(int64_t key, int64_t counter);
/// The top 53 bits of philox_bits(key, counter) as a double in [0, 1): an f64 draw.
double philox_uniform_f64(int64_t key, int64_t counter);
/// An integer uniform in [0, bound) (bound >= 1, unsigned), without bias:
/// attempt 0, 1, ... until one is accepted (each with probability > 1/2).
uint64_t philox_below(int64_t key, int64_t counter, uint64_t bound);

}  // namespace kiln
