// The one entry point every tensor op goes through. Eagerly it runs the op on
// the operands' device (a view when the layout allows, else a kernel) and
// records it on the autograd tape; inside a trace it adds a graph node.
#pragma once

#include <optional>
#include <vector>

#include "frontend/tensor.h"
#include "ir/attrs.h"
#include "ir/op.h"

namespace kiln::detail {

/// Runs (eager) or records (traced) op k on the operands.
Tensor apply(OpKind k, const std::vector<Tensor>& operands, Attrs attrs, SourceLoc loc);
/// Creation ops (constant, literal, arange): result type given.
Tensor create(OpKind k, Attrs attrs, const TensorType& type, SourceLoc loc);
/// A 0-d constant for a plain number used with `like`, typed by PyTorch's
/// scalar promotion (int tensor * 2.5 -> float32 constant).
Tensor scalar_operand(const Tensor& like, Scalar s, SourceLoc loc);
/// x clamped to [lo, hi] (either may be absent) with PyTorch's gradient at a
/// bound: clamp's flows to x there (grad_at_bounds), hardtanh's does not.
/// Where a gradient is recorded the bound is picked by `where`; maximum and
/// minimum, which split a tie's gradient, serve otherwise (the same values).
Tensor clamp_bounds(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi,
                    bool grad_at_bounds, Loc loc);
/// In-place write: self's elements become `value` (broadcast to self's shape and
/// cast to its dtype). Eagerly copies into self's storage; in a trace rebinds
/// self to the new value (a parameter update for captured tensors).
void assign(const Tensor& self, const Tensor& value, SourceLoc loc);
/// `t` checked by Check op `check` (ir/ops.def) with `attrs`: eagerly at once,
/// in a trace by a node the compiled plan runs at every call.
Tensor checked_values(OpKind check, const Tensor& t, const Attrs& attrs, Loc loc);
/// Integer indices checked to lie in [0, n) (check_index). Errors name `op`.
Tensor checked_indices(const Tensor& indices, int64_t n, const char* op, Loc loc);
/// The gather op (x read along `dim` at indices that checked_indices returned).
Tensor gather_along(const Tensor& x, int64_t dim, const Tensor& checked, Loc loc);
/// The scatter_add op (src added into base along `dim` at checked indices).
Tensor scatter_add_along(const Tensor& base, int64_t dim, const Tensor& checked, const Tensor& src, Loc loc);
/// dst = scatter_add(dst, index, src) {attrs}, in dst's own memory when it is a
/// dense CPU tensor (else computed and copied in); the buffer's version moves on.
/// Each element folds its contributions in index order, as the op does.
void scatter_add_into(const std::shared_ptr<TensorImpl>& dst, const Attrs& attrs, const Tensor& index,
                      const Tensor& src, SourceLoc loc);
/// One cluster of an adaptive softmax (the cluster_logprob op, frontend/
/// nn_attention.cpp): for each row r of h [N, H] whose target lies in [start,
/// start + C), log_softmax(h_r w^T)[targets[r] - start] with w [C, H]; 0 for
/// every other row, whose h row is not read. Work proportional to the member
/// rows, eagerly and in a trace; gradients to h and w.
Tensor cluster_log_prob(const Tensor& h, const Tensor& w, const Tensor& targets, int64_t start,
                        Loc loc);
/// Throws, naming `op` and the user's line, inside a trace: for the eager-only
/// functions whose result's size the data decides (`what`: "the number of
/// distinct values"), which a traced plan (static shapes, as jax.jit's) cannot have.
void check_size_static(const char* op, const char* what, Loc loc);
/// `r`, or a copy of it where it shares x's storage: for functions that are
/// copies in PyTorch (repeat, repeat_interleave, diff) built from views, which
/// with every repeat 1 (or n = 0) are x itself, and repeating a dim of size 1
/// an expand of it. A traced clone is only a new name for the value.
Tensor own_storage(const Tensor& r, const Tensor& x, Loc loc);
/// normalize_dim(dim, rank), its error attached to the user's line and `op`.
int64_t checked_dim(int64_t dim, int64_t rank, const char* op, Loc loc);
/// normalize_dims(dims, rank), its error attached to the user's line and `op`.
std::vector<int64_t> checked_dims(const std::vector<int64_t>& dims, int64_t rank, const char* op,
                                  Loc loc);
/// A number as the `value` attribute of a constant of dtype `dt`: an integer
/// scalar into an integer dtype exactly (int64), anything else as a double.
AttrValue scalar_attr(Scalar s, DType dt);
/// Throws, naming `who` and the user's line, unless the number `s` converts to
/// dtype `dt` without overflow, by libtorch's rule for the values a tensor is
/// filled or made with (full, fill_, tensor({...}, dtype), clamp's bounds): into
/// an integer dtype, a value in its range (uint8 also takes -255..-1, which wrap
/// as two's complement; a float must not be NaN); into bool and floating dtypes,
/// anything. (A number in arithmetic, x + 300, converts by wrapping, unchecked.)
void check_fits(Scalar s, DType dt, const char* who, SourceLoc loc);
/// Type of a tensor (eager or symbolic).
const TensorType& type_of(const Tensor& t);

inline SourceLoc here(const Loc& l) { return SourceLoc::from(l); }

}  // namespace kiln::detail
