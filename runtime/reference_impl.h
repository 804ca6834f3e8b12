// Internal to the reference kernels: one entry point per op category, called
// by reference_kernel (reference.cpp) after it has checked operand counts.
#pragma once

#include <span>
#include <vector>

#include "ir/attrs.h"
#include "ir/op.h"
#include "runtime/storage.h"

namespace kiln::detail {

/// Elementwise unary ops (cast included) of `in` broadcast to out.shape.
void ref_unary(OpKind k, const View& in, const View& out);
/// Elementwise binary ops with broadcasting of a and b to out.shape (attrs: philox's).
void ref_binary(OpKind k, const Attrs& attrs, const View& a, const View& b, const View& out);
/// where(cond, a, b) with broadcasting.
void ref_where(const View& cond, const View& a, const View& b, const View& out);
/// sum/max/min over attrs.dims, argmax/argmin over attrs.dim.
void ref_reduce(OpKind k, const Attrs& attrs, const View& in, const View& out);
/// The kernel of a reduce row (ops.def's reduce(identity, combine)) over the
/// sorted, normalised `dims` of a non-empty `in`: each output starts at `id` in
/// out's dtype and folds its elements in with binary op `combine`, whichever
/// op of the table that is (tests call it with combine ops no row uses yet).
void ref_fold(Identity id, OpKind combine, const std::vector<int64_t>& dims, const View& in,
              const View& out);
/// reshape, expand, permute, slice, pad.
void ref_movement(OpKind k, const Attrs& attrs, const View& in, const View& out);
/// cumsum, cumprod, logcumsumexp along attrs.dim (from the end when attrs.reverse).
void ref_scan(OpKind k, const Attrs& attrs, const View& in, const View& out);
/// attention, attention_grad (runtime/reference_attention.cpp).
void ref_attention(OpKind k, const Attrs& attrs, std::span<const View> in, const View& out);
/// cluster_logprob, cluster_logprob_grad (runtime/reference_cluster_logprob.cpp).
void ref_cluster_logprob(OpKind k, const Attrs& attrs, std::span<const View> in, const View& out);
/// argsort {dim, descending, count}.
void ref_argsort(const Attrs& attrs, const View& in, const View& out);
/// gather(x, index) {dim}.
void ref_gather(const Attrs& attrs, const View& x, const View& index, const View& out);
/// scatter_add(base, index, src) {dim}.
void ref_scatter_add(const Attrs& attrs, const View& base, const View& index, const View& src,
                     const View& out);
/// constant, literal, arange.
void ref_creation(OpKind k, const Attrs& attrs, const View& out);

}  // namespace kiln::detail
