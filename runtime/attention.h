// The attention library step (ir/ops.def's attention and attention_grad):
// softmax(scale * q k^T [+ causal mask]) v over dense [batch, T, d] buffers,
// streamed over blocks of keys with a running maximum and sum (flash-attention
// style), so no T x T matrix is ever held: memory is O(T * d) plus a block per
// thread. The gradient recomputes the probabilities block by block from each
// query row's log-sum-exp (one pass over the keys) instead of keeping them, and
// makes one pass over the key blocks for every gradient asked for.
// The reference kernels (runtime/reference_attention.cpp), one row at a time
// with the whole row of scores, are its oracle.
#pragma once

#include <array>
#include <cstdint>

#include "ir/attrs.h"
#include "ir/op.h"

namespace kiln {

struct AttentionShape {
  DType dtype = DType::f32;
  int64_t batch = 1;  // every leading dim
  int64_t tq = 1, tk = 1, d = 1, dv = 1;
  double scale = 1;
  bool causal = false;  // key j is seen by query i when j <= i (top-left aligned, as PyTorch)
};

/// The shape of an attention node or its gradient node from its q, k, v types and attributes.
AttentionShape attention_shape(const TensorType& q, const TensorType& k, const TensorType& v,
                               const Attrs& attrs);

/// out [batch, tq, dv] = softmax(scale * q k^T) v.
void attention_forward(const AttentionShape& s, const void* q, const void* k, const void* v,
                       void* out);

/// Where each gradient the mask `which` selects (q, k, v) starts in the flat
/// result of attention_backward, in elements; -1 for one not selected.
std::array<int64_t, 3> attention_grad_offsets(const AttentionShape& s, int which);

/// The gradients of attention with output `out` and output gradient `g` that the
/// bitmask `which` asks for: q (1, [batch, tq, d]), k (2, [batch, tk, d]), v (4,
/// [batch, tk, dv]), written one after the other in that order into `grad`.
void attention_backward(const AttentionShape& s, int which, const void* q, const void* k,
                        const void* v, const void* out, const void* g, void* grad);

}  // namespace kiln
