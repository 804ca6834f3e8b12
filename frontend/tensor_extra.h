// libtorch's namespace-level tensor functions beyond tensor.h's: the free
// spellings of the methods in tensor.h's "more of libtorch's tensor functions"
// and "selections whose size the data decides", and the functions that are
// only free (meshgrid, cdist, searchsorted, tensordot, block_diag, ...) and
// torch.linalg's norms. Included by tensor.h; defined in frontend/
// tensor_extra.cpp and frontend/tensor_select.cpp.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

Tensor diag(const Tensor& x, int64_t diagonal = 0, KILN_LOC);
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1, KILN_LOC);
Tensor trace(const Tensor& x, KILN_LOC);
Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight, KILN_LOC);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight, KILN_LOC);
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta = 1,
               Scalar alpha = 1, KILN_LOC);
Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta = 1,
              Scalar alpha = 1, KILN_LOC);
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, Scalar beta = 1,
             Scalar alpha = 1, KILN_LOC);
Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, Scalar beta = 1,
            Scalar alpha = 1, KILN_LOC);
Tensor median(const Tensor& x, KILN_LOC);
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false, KILN_LOC);
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt,
                         KILN_LOC);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt, KILN_LOC);
/// 0..n-1, each i repeated repeats[i] times (torch.repeat_interleave(repeats)).
Tensor repeat_interleave(const Tensor& repeats, KILN_LOC);
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = std::nullopt,
                  std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt, KILN_LOC);
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false, KILN_LOC);
std::tuple<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt,
                                   bool keepdim = false, KILN_LOC);
Tensor movedim(const Tensor& x, std::vector<int64_t> source, std::vector<int64_t> destination,
               KILN_LOC);
Tensor movedim(const Tensor& x, int64_t source, int64_t destination, KILN_LOC);
Tensor moveaxis(const Tensor& x, int64_t source, int64_t destination, KILN_LOC);
Tensor swapaxes(const Tensor& x, int64_t dim0, int64_t dim1, KILN_LOC);
Tensor swapdims(const Tensor& x, int64_t dim0, int64_t dim1, KILN_LOC);
Tensor diff(const Tensor& x, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = Tensor(),
            const Tensor& append = Tensor(), KILN_LOC);
Tensor heaviside(const Tensor& x, const Tensor& values, KILN_LOC);
Tensor logical_xor(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor floor_divide(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor floor_divide(const Tensor& a, Scalar b, KILN_LOC);
Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim = std::nullopt, KILN_LOC);
Tensor kron(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor rot90(const Tensor& x, int64_t k = 1, Dims dims = {0, 1}, KILN_LOC);
Tensor histc(const Tensor& x, int64_t bins = 100, Scalar min = 0, Scalar max = 0, KILN_LOC);
Tensor masked_select(const Tensor& x, const Tensor& mask, KILN_LOC);
Tensor nonzero(const Tensor& x, KILN_LOC);
Tensor argwhere(const Tensor& x, KILN_LOC);
Tensor bincount(const Tensor& x, const Tensor& weights = Tensor(), int64_t minlength = 0, KILN_LOC);

Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = 1, KILN_LOC);
Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = 1, KILN_LOC);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value, KILN_LOC);
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, KILN_LOC);
Tensor take(const Tensor& x, const Tensor& index, KILN_LOC);
Tensor tile(const Tensor& x, Dims reps, KILN_LOC);
Tensor count_nonzero(const Tensor& x, Dims dims = {}, KILN_LOC);
Tensor nansum(const Tensor& x, Dims dims = {}, bool keepdim = false, KILN_LOC);
Tensor nanmean(const Tensor& x, Dims dims = {}, bool keepdim = false, KILN_LOC);
/// Tensor::cummax and cummin (values and int64 indices).
std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim, KILN_LOC);
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim, KILN_LOC);
Tensor det(const Tensor& x, KILN_LOC);
Tensor inverse(const Tensor& x, KILN_LOC);
Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt, KILN_LOC);
Tensor xlogy(const Tensor& x, const Tensor& y, KILN_LOC);
Tensor sinc(const Tensor& x, KILN_LOC);
Tensor deg2rad(const Tensor& x, KILN_LOC);
Tensor rad2deg(const Tensor& x, KILN_LOC);
Tensor frac(const Tensor& x, KILN_LOC);
Tensor signbit(const Tensor& x, KILN_LOC);
Tensor copysign(const Tensor& x, const Tensor& other, KILN_LOC);
Tensor float_power(const Tensor& x, const Tensor& exponent, KILN_LOC);
Tensor float_power(const Tensor& x, Scalar exponent, KILN_LOC);
Tensor true_divide(const Tensor& a, const Tensor& b, KILN_LOC);
Tensor clip(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt, KILN_LOC);
Tensor absolute(const Tensor& x, KILN_LOC);
Tensor negative(const Tensor& x, KILN_LOC);
Tensor sgn(const Tensor& x, KILN_LOC);
/// other - alpha * x (torch.rsub).
Tensor rsub(const Tensor& x, const Tensor& other, Scalar alpha = 1, KILN_LOC);
Tensor rsub(const Tensor& x, Scalar other, Scalar alpha = 1, KILN_LOC);
/// The standard deviation (variance) and the mean over dims (all without).
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, Dims dims = {}, bool unbiased = true,
                                    bool keepdim = false, KILN_LOC);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, Dims dims = {}, bool unbiased = true,
                                    bool keepdim = false, KILN_LOC);
/// 0-D tensors as [1]; 0-D and 1-D as [1, n]; up to 2-D as [1, n, 1] or [m, n, 1].
Tensor atleast_1d(const Tensor& x, KILN_LOC);
Tensor atleast_2d(const Tensor& x, KILN_LOC);
Tensor atleast_3d(const Tensor& x, KILN_LOC);
/// Joins along dim 1 (dim 0 for 1-D tensors), 0 after atleast_2d, 2 after
/// atleast_3d; column_stack makes 0-D and 1-D tensors columns first.
Tensor hstack(const std::vector<Tensor>& tensors, KILN_LOC);
Tensor vstack(const std::vector<Tensor>& tensors, KILN_LOC);
Tensor dstack(const std::vector<Tensor>& tensors, KILN_LOC);
Tensor column_stack(const std::vector<Tensor>& tensors, KILN_LOC);

/// Coordinate grids of 1-D (or 0-D) tensors: with "ij" the i-th tensor varies
/// along dim i; with "xy" the first two swap places (torch.meshgrid).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing = "ij",
                             KILN_LOC);
/// The p-norm distance between each row of x1 [..., P, M] and each of x2
/// [..., R, M]: [..., P, R] (torch.cdist; its gradient is 0 at a zero distance).
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0, KILN_LOC);
/// For each value, the position in the sorted last dim of `sorted_sequence`
/// where it would be inserted to keep the order: after the equal ones with
/// `right` (or side "right"). `sorter` orders an unsorted sequence; NaN values
/// go to the end. int64, or int32 with out_int32.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32 = false,
                    bool right = false, const std::string& side = "",
                    const Tensor& sorter = Tensor(), KILN_LOC);
Tensor searchsorted(const Tensor& sorted_sequence, Scalar value, bool out_int32 = false,
                    bool right = false, const std::string& side = "",
                    const Tensor& sorter = Tensor(), KILN_LOC);
/// The bucket of each input among 1-D sorted `boundaries`:
/// boundaries[i-1] < x <= boundaries[i] (with `right`, <= and <).
Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool out_int32 = false,
                 bool right = false, KILN_LOC);
/// Sums the products over dims_a of a and dims_b of b (torch.tensordot): the
/// free dims of a, then those of b.
Tensor tensordot(const Tensor& a, const Tensor& b, Dims dims_a, Dims dims_b, KILN_LOC);
/// The tensors (0-, 1- or 2-D) on the diagonal of one matrix, zeros elsewhere.
Tensor block_diag(const std::vector<Tensor>& tensors, KILN_LOC);
/// Every combination of one element of each 1-D tensor, as rows [n, k].
Tensor cartesian_prod(const std::vector<Tensor>& tensors, KILN_LOC);
/// The r-element combinations of a 1-D tensor's elements, as rows in
/// itertools' order (with repeats when with_replacement).
Tensor combinations(const Tensor& x, int64_t r = 2, bool with_replacement = false, KILN_LOC);

/// Dims that may be absent, as libtorch's OptionalIntArrayRef: std::nullopt,
/// {0, 2}, a std::vector or one dim.
struct OptionalDims {
  std::optional<std::vector<int64_t>> dims;
  OptionalDims() = default;
  OptionalDims(std::nullopt_t) {}                                            // NOLINT: implicit
  OptionalDims(std::initializer_list<int64_t> d) : dims(std::vector<int64_t>(d)) {}  // NOLINT
  OptionalDims(std::vector<int64_t> d) : dims(std::move(d)) {}               // NOLINT
  OptionalDims(int64_t d) : dims(std::vector<int64_t>{d}) {}                 // NOLINT
};

namespace linalg {
/// The ord-norm of the elements over `dim` (all dims without one), as
/// Tensor::norm (torch.linalg.vector_norm), computed in `dtype` when given.
Tensor vector_norm(const Tensor& x, double ord = 2, OptionalDims dim = {}, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt, KILN_LOC);
/// The matrix norm over the two dims `dim`: "fro", or ord 1, -1 (the largest,
/// smallest column sum of |x|), inf, -inf (row sums). ord 2, -2 and "nuc" need
/// singular values, which Kiln does not have: an error naming them.
Tensor matrix_norm(const Tensor& x, const std::string& ord = "fro", Dims dim = {-2, -1},
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt, KILN_LOC);
Tensor matrix_norm(const Tensor& x, double ord, Dims dim = {-2, -1},
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt, KILN_LOC);
/// torch.linalg.norm: without ord, the 2-norm of the flattened tensor (of one
/// dim) or the Frobenius norm (of two dims); with ord, vector_norm over one dim
/// (or a 1-D tensor) and matrix_norm over two (or a 2-D tensor).
Tensor norm(const Tensor& x, std::optional<double> ord = std::nullopt, OptionalDims dim = {},
            bool keepdim = false,
            std::optional<DType> dtype = std::nullopt, KILN_LOC);
Tensor norm(const Tensor& x, const std::string& ord, OptionalDims dim = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt, KILN_LOC);
/// The determinant and the inverse of square matrices [..., n, n] (LU with
/// partial pivoting; a singular matrix's det is 0 and its inverse an error),
/// and X with A X = B (left) or X A = B: B is [..., n, k] or [..., n]. Eager
/// only (the pivots depend on the values): inside a trace, an error naming the
/// line. Gradients flow to A and B (d inv = -inv dA inv).
Tensor det(const Tensor& A, KILN_LOC);
Tensor inv(const Tensor& A, KILN_LOC);
Tensor solve(const Tensor& A, const Tensor& B, bool left = true, KILN_LOC);
}  // namespace linalg

}  // namespace kiln
