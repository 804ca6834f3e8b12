// libtorch's namespace-level functions, on Kiln (the compatibility layer:
// README, "Coming from libtorch"): creation (torch::zeros, randn, ...), math,
// reductions, shapes and joins, activations and the ATen losses. Each names
// Kiln's own function; nothing here is a second implementation.
//
// Free functions: those whose names the C library also has (tanh, pow, abs,
// max, ...) are Kiln's plain overloads, so `using namespace std;` and `using
// namespace torch;` together still resolve. The others are function objects:
// they can be passed by name (nn::Functional(torch::relu)), and the source line
// of the call reaches Kiln through their first parameter (TensorAt), also when
// nn::Functional makes the call.
#pragma once

#include "runtime/thread_pool.h"
#include "torch/types.h"

namespace torch {

using kiln::manual_seed;
/// The threads Kiln's CPU kernels use (KILN_NUM_THREADS).
inline void set_num_threads(int n) {
  kiln::set_num_threads(n);
}
inline int get_num_threads() {
  return kiln::num_threads();
}

// ---- creation ----
using kiln::arange;
using kiln::eye;
using kiln::linspace;
using kiln::logspace;
using kiln::multinomial;
using kiln::scalar_tensor;
using kiln::tensor;

inline Tensor zeros(IntArrayRef size, TensorOptions o = {}, kiln::Loc l = kiln::Loc::current()) {
  return kiln::zeros(size.vec(), o, l);
}
inline Tensor ones(IntArrayRef size, TensorOptions o = {}, kiln::Loc l = kiln::Loc::current()) {
  return kiln::ones(size.vec(), o, l);
}
inline Tensor empty(IntArrayRef size, TensorOptions o = {}, kiln::Loc l = kiln::Loc::current()) {
  return kiln::empty(size.vec(), o, l);
}
inline Tensor full(IntArrayRef size, Scalar v, TensorOptions o = {},
                   kiln::Loc l = kiln::Loc::current()) {
  return kiln::full(size.vec(), v, o, l);
}
inline Tensor rand(IntArrayRef size, TensorOptions o = {}, kiln::Loc l = kiln::Loc::current()) {
  return kiln::rand(size.vec(), o, l);
}
inline Tensor randn(IntArrayRef size, TensorOptions o = {}, kiln::Loc l = kiln::Loc::current()) {
  return kiln::randn(size.vec(), o, l);
}
inline Tensor randint(int64_t high, IntArrayRef size, TensorOptions o = {},
                      kiln::Loc l = kiln::Loc::current()) {
  return kiln::randint(high, size.vec(), o, l);
}
inline Tensor randint(int64_t low, int64_t high, IntArrayRef size, TensorOptions o = {},
                      kiln::Loc l = kiln::Loc::current()) {
  return kiln::randint(low, high, size.vec(), o, l);
}
inline Tensor randperm(int64_t n, TensorOptions o = {}, kiln::Loc l = kiln::Loc::current()) {
  return kiln::randperm(n, o, l);
}
/// A new tensor like `t`; options given replace t's dtype and device.
inline TensorOptions like_options(const Tensor& t, const std::optional<TensorOptions>& o) {
  if (!o) return t.options();
  TensorOptions r = *o;
  if (!r.has_dtype()) r = r.dtype(t.dtype());
  return r;
}
inline Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt,
                         kiln::Loc l = kiln::Loc::current()) {
  return kiln::zeros(t.sizes(), like_options(t, o), l);
}
inline Tensor ones_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt,
                        kiln::Loc l = kiln::Loc::current()) {
  return kiln::ones(t.sizes(), like_options(t, o), l);
}
inline Tensor empty_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt,
                         kiln::Loc l = kiln::Loc::current()) {
  return kiln::empty(t.sizes(), like_options(t, o), l);
}
inline Tensor full_like(const Tensor& t, Scalar v, std::optional<TensorOptions> o = std::nullopt,
                        kiln::Loc l = kiln::Loc::current()) {
  return kiln::full(t.sizes(), v, like_options(t, o), l);
}
inline Tensor rand_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt,
                        kiln::Loc l = kiln::Loc::current()) {
  return kiln::rand(t.sizes(), like_options(t, o), l);
}
inline Tensor randn_like(const Tensor& t, std::optional<TensorOptions> o = std::nullopt,
                         kiln::Loc l = kiln::Loc::current()) {
  return kiln::randn(t.sizes(), like_options(t, o), l);
}
inline Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions o = {},
                        kiln::Loc l = kiln::Loc::current()) {
  return kiln::from_blob(data, sizes.vec(), o, l);
}
inline Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions o = {},
                        kiln::Loc l = kiln::Loc::current()) {
  return kiln::from_blob(data, sizes.vec(), strides.vec(), o, l);
}

// ---- free functions the C library also names: Kiln's plain overloads ----
using kiln::abs;
using kiln::ceil;
using kiln::clamp;
using kiln::cos;
using kiln::erf;
using kiln::exp;
using kiln::expm1;
using kiln::floor;
using kiln::fmod;
using kiln::isfinite;
using kiln::isinf;
using kiln::isnan;
using kiln::log;
using kiln::log10;
using kiln::log1p;
using kiln::log2;
using kiln::max;
using kiln::min;
using kiln::norm;
using kiln::pow;
using kiln::remainder;
using kiln::round;
using kiln::sin;
using kiln::sort;
using kiln::sqrt;
using kiln::tanh;
using kiln::trunc;

using kiln::allclose;
using kiln::einsum;
using kiln::equal;

// More tensor functions (frontend/tensor_extra.h): Kiln's plain functions.
using kiln::absolute;
using kiln::addbmm;
using kiln::addcdiv;
using kiln::addcmul;
using kiln::addmv;
using kiln::addr;
using kiln::aminmax;
using kiln::argwhere;
using kiln::atan2;
using kiln::atleast_1d;
using kiln::atleast_2d;
using kiln::atleast_3d;
using kiln::baddbmm;
using kiln::bincount;
using kiln::block_diag;
using kiln::bucketize;
using kiln::cartesian_prod;
using kiln::cdist;
using kiln::clip;
using kiln::column_stack;
using kiln::combinations;
using kiln::copysign;
using kiln::count_nonzero;
using kiln::cross;
using kiln::cummax;
using kiln::cummin;
using kiln::cumprod;
using kiln::deg2rad;
using kiln::det;
using kiln::diag;
using kiln::diagonal;
using kiln::diff;
using kiln::dstack;
using kiln::float_power;
using kiln::floor_divide;
using kiln::frac;
using kiln::heaviside;
using kiln::histc;
using kiln::hstack;
using kiln::hypot;
using kiln::index_add;
using kiln::index_copy;
using kiln::index_fill;
using kiln::inverse;
using kiln::isclose;
using kiln::kron;
using kiln::kthvalue;
using kiln::lerp;
using kiln::logaddexp;
using kiln::logcumsumexp;
using kiln::logical_xor;
using kiln::logit;
using kiln::masked_select;
using kiln::median;
using kiln::meshgrid;
using kiln::moveaxis;
using kiln::movedim;
using kiln::nan_to_num;
using kiln::nanmean;
using kiln::nansum;
using kiln::negative;
using kiln::nonzero;
using kiln::rad2deg;
using kiln::repeat_interleave;
using kiln::rot90;
using kiln::rsub;
using kiln::searchsorted;
using kiln::sgn;
using kiln::signbit;
using kiln::sinc;
using kiln::std_mean;
using kiln::swapaxes;
using kiln::swapdims;
using kiln::take;
using kiln::tensordot;
using kiln::tile;
using kiln::trace;
using kiln::true_divide;
using kiln::var_mean;
using kiln::vstack;
using kiln::xlogy;
namespace linalg {
using kiln::linalg::det;
using kiln::linalg::inv;
using kiln::linalg::matrix_norm;
using kiln::linalg::norm;
using kiln::linalg::solve;
using kiln::linalg::vector_norm;
}  // namespace linalg

namespace detail {

using kiln::Loc;
using kiln::TensorAt;
using IntList = IntArrayRef;

/// The nll_loss-style integer reduction as Kiln's.
inline kiln::nn::Reduction reduction_of(int64_t r) {
  switch (r) {
    case Reduction::None:
      return kiln::nn::Reduction::None;
    case Reduction::Sum:
      return kiln::nn::Reduction::Sum;
    case Reduction::Mean:
      return kiln::nn::Reduction::Mean;
  }
  throw kiln::Error("expected a reduction torch::Reduction::None (0), Mean (1) or Sum (2), got " +
                    std::to_string(r));
}

// One function object per free function: a struct with the overloads, named *_fn.
#define KILN_TORCH_UNARY(name)                                      \
  struct name##_fn {                                                \
    Tensor operator()(TensorAt x) const { return x.t.name(x.loc); } \
  };
KILN_TORCH_UNARY(neg)
KILN_TORCH_UNARY(rsqrt)
KILN_TORCH_UNARY(sigmoid)
KILN_TORCH_UNARY(relu)
KILN_TORCH_UNARY(sign)
KILN_TORCH_UNARY(reciprocal)
KILN_TORCH_UNARY(square)
KILN_TORCH_UNARY(logical_not)
KILN_TORCH_UNARY(t)
KILN_TORCH_UNARY(clone)
KILN_TORCH_UNARY(contiguous)
#undef KILN_TORCH_UNARY
struct detach_fn {
  Tensor operator()(const Tensor& x) const { return x.detach(); }
};
struct silu_fn {
  Tensor operator()(TensorAt x) const { return kiln::nn::functional::silu(x.t, x.loc); }
};
struct gelu_fn {
  Tensor operator()(TensorAt x, const std::string& approximate = "none") const {
    return kiln::nn::functional::gelu(x.t, approximate, x.loc);
  }
};
struct leaky_relu_fn {
  Tensor operator()(TensorAt x, Scalar negative_slope = 0.01) const {
    return kiln::nn::functional::leaky_relu(x.t, negative_slope.toDouble(), x.loc);
  }
};
struct elu_fn {
  Tensor operator()(TensorAt x, Scalar alpha = 1, Scalar scale = 1, Scalar input_scale = 1) const {
    Tensor in = input_scale.toDouble() == 1 ? x.t : x.t.mul(input_scale, x.loc);
    Tensor y = kiln::nn::functional::elu(in, alpha.toDouble(), x.loc);
    return scale.toDouble() == 1 ? y : y.mul(scale, x.loc);
  }
};
struct selu_fn {
  Tensor operator()(TensorAt x) const { return kiln::nn::functional::selu(x.t, x.loc); }
};
struct hardswish_fn {
  Tensor operator()(TensorAt x) const { return kiln::nn::functional::hardswish(x.t, x.loc); }
};
struct hardsigmoid_fn {
  Tensor operator()(TensorAt x) const { return kiln::nn::functional::hardsigmoid(x.t, x.loc); }
};
struct hardtanh_fn {
  Tensor operator()(TensorAt x, Scalar min_val = -1, Scalar max_val = 1) const {
    return kiln::nn::functional::hardtanh(x.t, min_val.toDouble(), max_val.toDouble(), x.loc);
  }
};
struct softplus_fn {
  Tensor operator()(TensorAt x, Scalar beta = 1, Scalar threshold = 20) const {
    return kiln::nn::functional::softplus(x.t, beta.toDouble(), threshold.toDouble(), x.loc);
  }
};
struct softmax_fn {
  Tensor operator()(TensorAt x, int64_t dim,
                    std::optional<kiln::DType> dtype = std::nullopt) const {
    return (dtype ? x.t.to(*dtype, x.loc) : x.t).softmax(dim, x.loc);
  }
};
struct log_softmax_fn {
  Tensor operator()(TensorAt x, int64_t dim,
                    std::optional<kiln::DType> dtype = std::nullopt) const {
    return (dtype ? x.t.to(*dtype, x.loc) : x.t).log_softmax(dim, x.loc);
  }
};
struct dropout_fn {
  Tensor operator()(TensorAt x, double p, bool train) const {
    return kiln::nn::functional::dropout(x.t, p, train, x.loc);
  }
};
struct feature_dropout_fn {
  Tensor operator()(TensorAt x, double p, bool train) const {
    return kiln::nn::functional::dropout2d(x.t, p, train, x.loc);
  }
};
struct add_fn {
  Tensor operator()(TensorAt a, const Tensor& b, Scalar alpha = 1) const {
    return a.t.add(b, alpha, a.loc);
  }
  Tensor operator()(TensorAt a, Scalar b, Scalar alpha = 1) const {
    return a.t.add(Scalar(b.toDouble() * alpha.toDouble()), a.loc);
  }
};
struct sub_fn {
  Tensor operator()(TensorAt a, const Tensor& b, Scalar alpha = 1) const {
    return a.t.sub(b, alpha, a.loc);
  }
  Tensor operator()(TensorAt a, Scalar b, Scalar alpha = 1) const {
    return a.t.sub(Scalar(b.toDouble() * alpha.toDouble()), a.loc);
  }
};
#define KILN_TORCH_BINARY(name)                                                         \
  struct name##_fn {                                                                    \
    Tensor operator()(TensorAt a, const Tensor& b) const { return a.t.name(b, a.loc); } \
    Tensor operator()(TensorAt a, Scalar b) const { return a.t.name(b, a.loc); }        \
  };
KILN_TORCH_BINARY(mul)
KILN_TORCH_BINARY(div)
KILN_TORCH_BINARY(eq)
KILN_TORCH_BINARY(ne)
KILN_TORCH_BINARY(lt)
KILN_TORCH_BINARY(le)
KILN_TORCH_BINARY(gt)
KILN_TORCH_BINARY(ge)
#undef KILN_TORCH_BINARY
#define KILN_TORCH_TENSOR_BINARY(name)                                                  \
  struct name##_fn {                                                                    \
    Tensor operator()(TensorAt a, const Tensor& b) const { return a.t.name(b, a.loc); } \
  };
KILN_TORCH_TENSOR_BINARY(maximum)
KILN_TORCH_TENSOR_BINARY(minimum)
KILN_TORCH_TENSOR_BINARY(logical_and)
KILN_TORCH_TENSOR_BINARY(logical_or)
KILN_TORCH_TENSOR_BINARY(matmul)
KILN_TORCH_TENSOR_BINARY(mm)
KILN_TORCH_TENSOR_BINARY(bmm)
KILN_TORCH_TENSOR_BINARY(outer)
KILN_TORCH_TENSOR_BINARY(ger)
#undef KILN_TORCH_TENSOR_BINARY
struct addmm_fn {
  Tensor operator()(TensorAt self, const Tensor& mat1, const Tensor& mat2, Scalar beta = 1,
                    Scalar alpha = 1) const {
    return self.t.addmm(mat1, mat2, beta, alpha, self.loc);
  }
};
struct dot_fn {
  Tensor operator()(TensorAt a, const Tensor& b) const {
    if (a.t.dim() != 1 || b.dim() != 1)
      throw kiln::Error("dot: expected two 1-D tensors, got " + kiln::shape_str(a.t.sizes()) +
                            " and " + kiln::shape_str(b.sizes()),
                        kiln::SourceLoc::from(a.loc));
    return a.t.mul(b, a.loc).sum(a.loc);
  }
};
struct mv_fn {
  Tensor operator()(TensorAt a, const Tensor& v) const { return a.t.matmul(v, a.loc); }
};
struct where_fn {
  Tensor operator()(TensorAt c, const Tensor& a, const Tensor& b) const {
    return kiln::where(c.t, a, b, c.loc);
  }
  Tensor operator()(TensorAt c, const Tensor& a, Scalar b) const {
    return kiln::where(c.t, a, kiln::full({}, b, a.options(), c.loc), c.loc);
  }
  Tensor operator()(TensorAt c, Scalar a, const Tensor& b) const {
    return kiln::where(c.t, kiln::full({}, a, b.options(), c.loc), b, c.loc);
  }
};
struct masked_fill_fn {
  Tensor operator()(TensorAt x, const Tensor& mask, Scalar v) const {
    return x.t.masked_fill(mask, v, x.loc);
  }
  Tensor operator()(TensorAt x, const Tensor& mask, const Tensor& v) const {
    return x.t.masked_fill(mask, v, x.loc);
  }
};
struct clamp_min_fn {
  Tensor operator()(TensorAt x, Scalar m) const { return x.t.clamp_min(m, x.loc); }
};
struct clamp_max_fn {
  Tensor operator()(TensorAt x, Scalar m) const { return x.t.clamp_max(m, x.loc); }
};
// Reductions.
#define KILN_TORCH_REDUCTION(name)                                                   \
  struct name##_fn {                                                                 \
    Tensor operator()(TensorAt x) const { return x.t.name(x.loc); }                  \
    Tensor operator()(TensorAt x, kiln::DType dtype) const {                         \
      return x.t.to(dtype, x.loc).name(x.loc);                                       \
    }                                                                                \
    Tensor operator()(TensorAt x, IntList dims, bool keepdim = false,                \
                      std::optional<kiln::DType> dtype = std::nullopt) const {       \
      return (dtype ? x.t.to(*dtype, x.loc) : x.t).name(dims.vec(), keepdim, x.loc); \
    }                                                                                \
  };
KILN_TORCH_REDUCTION(sum)
KILN_TORCH_REDUCTION(mean)
#undef KILN_TORCH_REDUCTION
struct prod_fn {
  Tensor operator()(TensorAt x) const { return x.t.prod(x.loc); }
  Tensor operator()(TensorAt x, int64_t dim, bool keepdim = false) const {
    return x.t.prod(dim, keepdim, x.loc);
  }
};
struct amax_fn {
  Tensor operator()(TensorAt x, IntList dims = {}, bool keepdim = false) const {
    return x.t.amax(dims.vec(), keepdim, x.loc);
  }
};
struct amin_fn {
  Tensor operator()(TensorAt x, IntList dims = {}, bool keepdim = false) const {
    return x.t.amin(dims.vec(), keepdim, x.loc);
  }
};
struct argmax_fn {
  Tensor operator()(TensorAt x, std::optional<int64_t> dim = std::nullopt,
                    bool keepdim = false) const {
    return dim ? x.t.argmax(*dim, keepdim, x.loc) : x.t.argmax(x.loc);
  }
};
struct argmin_fn {
  Tensor operator()(TensorAt x, std::optional<int64_t> dim = std::nullopt,
                    bool keepdim = false) const {
    return dim ? x.t.argmin(*dim, keepdim, x.loc) : x.t.argmin(x.loc);
  }
};
#define KILN_TORCH_MOMENT(name)                                                   \
  struct name##_fn {                                                              \
    Tensor operator()(TensorAt x, bool unbiased = true) const {                   \
      std::vector<int64_t> dims(static_cast<size_t>(x.t.dim()));                  \
      for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i); \
      return x.t.name(dims, unbiased, false, x.loc);                              \
    }                                                                             \
    Tensor operator()(TensorAt x, IntList dims, bool unbiased = true,             \
                      bool keepdim = false) const {                               \
      return x.t.name(dims.vec(), unbiased, keepdim, x.loc);                      \
    }                                                                             \
  };
KILN_TORCH_MOMENT(var)
KILN_TORCH_MOMENT(std)
#undef KILN_TORCH_MOMENT
struct logsumexp_fn {
  Tensor operator()(TensorAt x, IntList dims, bool keepdim = false) const {
    return x.t.logsumexp(dims.vec(), keepdim, x.loc);
  }
};
struct all_fn {
  Tensor operator()(TensorAt x) const { return x.t.all(x.loc); }
  Tensor operator()(TensorAt x, int64_t dim, bool keepdim = false) const {
    return x.t.all(dim, keepdim, x.loc);
  }
};
struct any_fn {
  Tensor operator()(TensorAt x) const { return x.t.any(x.loc); }
  Tensor operator()(TensorAt x, int64_t dim, bool keepdim = false) const {
    return x.t.any(dim, keepdim, x.loc);
  }
};
struct cumsum_fn {
  Tensor operator()(TensorAt x, int64_t dim) const { return x.t.cumsum(dim, x.loc); }
};
struct argsort_fn {
  Tensor operator()(TensorAt x, int64_t dim = -1, bool descending = false) const {
    return x.t.argsort(dim, descending, x.loc);
  }
};
struct topk_fn {
  std::tuple<Tensor, Tensor> operator()(TensorAt x, int64_t k, int64_t dim = -1,
                                        bool largest = true, bool sorted = true) const {
    return x.t.topk(k, dim, largest, sorted, x.loc);
  }
};
// Shapes and joins.
struct reshape_fn {
  Tensor operator()(TensorAt x, IntList shape) const { return x.t.reshape(shape.vec(), x.loc); }
};
struct flatten_fn {
  Tensor operator()(TensorAt x, int64_t start_dim = 0, int64_t end_dim = -1) const {
    return x.t.flatten(start_dim, end_dim, x.loc);
  }
};
struct squeeze_fn {
  Tensor operator()(TensorAt x) const { return x.t.squeeze(x.loc); }
  Tensor operator()(TensorAt x, int64_t dim) const { return x.t.squeeze(dim, x.loc); }
};
struct unsqueeze_fn {
  Tensor operator()(TensorAt x, int64_t dim) const { return x.t.unsqueeze(dim, x.loc); }
};
struct transpose_fn {
  Tensor operator()(TensorAt x, int64_t d0, int64_t d1) const {
    return x.t.transpose(d0, d1, x.loc);
  }
};
struct permute_fn {
  Tensor operator()(TensorAt x, IntList dims) const { return x.t.permute(dims.vec(), x.loc); }
};
struct narrow_fn {
  Tensor operator()(TensorAt x, int64_t dim, int64_t start, int64_t length) const {
    return x.t.narrow(dim, start, length, x.loc);
  }
};
struct select_fn {
  Tensor operator()(TensorAt x, int64_t dim, int64_t index) const {
    return x.t.select(dim, index, x.loc);
  }
};
struct index_select_fn {
  Tensor operator()(TensorAt x, int64_t dim, const Tensor& index) const {
    return x.t.index_select(dim, index, x.loc);
  }
};
struct gather_fn {
  Tensor operator()(TensorAt x, int64_t dim, const Tensor& index) const {
    return x.t.gather(dim, index, x.loc);
  }
};
struct scatter_add_fn {
  Tensor operator()(TensorAt x, int64_t dim, const Tensor& index, const Tensor& src) const {
    return x.t.scatter_add(dim, index, src, x.loc);
  }
};
struct scatter_fn {
  Tensor operator()(TensorAt x, int64_t dim, const Tensor& index, const Tensor& src) const {
    return x.t.scatter(dim, index, src, x.loc);
  }
  Tensor operator()(TensorAt x, int64_t dim, const Tensor& index, Scalar value) const {
    return x.t.scatter(dim, index, value, x.loc);
  }
};
struct flip_fn {
  Tensor operator()(TensorAt x, IntList dims) const { return x.t.flip(dims.vec(), x.loc); }
};
struct roll_fn {
  Tensor operator()(TensorAt x, IntList shifts, IntList dims = {}) const {
    return x.t.roll(shifts.vec(), dims.vec(), x.loc);
  }
};
struct chunk_fn {
  std::vector<Tensor> operator()(TensorAt x, int64_t chunks, int64_t dim = 0) const {
    return x.t.chunk(chunks, dim, x.loc);
  }
};
struct split_fn {
  std::vector<Tensor> operator()(TensorAt x, int64_t size, int64_t dim = 0) const {
    return x.t.split(size, dim, x.loc);
  }
};
struct tril_fn {
  Tensor operator()(TensorAt x, int64_t diagonal = 0) const { return x.t.tril(diagonal, x.loc); }
};
struct triu_fn {
  Tensor operator()(TensorAt x, int64_t diagonal = 0) const { return x.t.triu(diagonal, x.loc); }
};
struct cat_fn {
  Tensor operator()(const std::vector<Tensor>& ts, int64_t dim = 0, Loc l = Loc::current()) const {
    return kiln::cat(ts, dim, l);
  }
};
struct stack_fn {
  Tensor operator()(const std::vector<Tensor>& ts, int64_t dim = 0, Loc l = Loc::current()) const {
    return kiln::stack(ts, dim, l);
  }
};
// nn functions at namespace level (ATen's signatures).
struct max_pool2d_fn {
  Tensor operator()(TensorAt x, kiln::ExpandingArray2 kernel_size, IntList stride = {},
                    IntList padding = 0, IntList dilation = 1, bool ceil_mode = false) const {
    auto pair = [](const IntList& v) {
      return v.size() == 1 ? kiln::ExpandingArray2(v[0]) : kiln::ExpandingArray2({v[0], v[1]});
    };
    std::optional<kiln::ExpandingArray2> s;
    if (!stride.empty()) s = pair(stride);
    return kiln::max_pool2d(x.t, kernel_size, s, pair(padding), pair(dilation), ceil_mode, x.loc);
  }
};
struct avg_pool2d_fn {
  Tensor operator()(TensorAt x, kiln::ExpandingArray2 kernel_size, IntList stride = {},
                    IntList padding = 0, bool ceil_mode = false,
                    bool count_include_pad = true) const {
    auto pair = [](const IntList& v) {
      return v.size() == 1 ? kiln::ExpandingArray2(v[0]) : kiln::ExpandingArray2({v[0], v[1]});
    };
    std::optional<kiln::ExpandingArray2> s;
    if (!stride.empty()) s = pair(stride);
    return kiln::avg_pool2d(x.t, kernel_size, s, pair(padding), ceil_mode, count_include_pad,
                            x.loc);
  }
};
struct adaptive_avg_pool2d_fn {
  Tensor operator()(TensorAt x, kiln::ExpandingArray2 output_size) const {
    return kiln::adaptive_avg_pool2d(x.t, output_size, x.loc);
  }
};
struct conv2d_fn {
  Tensor operator()(TensorAt x, const Tensor& weight, const Tensor& bias = {},
                    kiln::ExpandingArray2 stride = 1, kiln::ExpandingArray2 padding = 0,
                    kiln::ExpandingArray2 dilation = 1, int64_t groups = 1) const {
    return kiln::conv2d(x.t, weight, bias, stride, padding, dilation, groups, x.loc);
  }
};
struct conv_transpose2d_fn {
  Tensor operator()(TensorAt x, const Tensor& weight, const Tensor& bias = {},
                    kiln::ExpandingArray2 stride = 1, kiln::ExpandingArray2 padding = 0,
                    kiln::ExpandingArray2 output_padding = 0, int64_t groups = 1,
                    kiln::ExpandingArray2 dilation = 1) const {
    return kiln::conv_transpose2d(x.t, weight, bias, stride, padding, output_padding, groups,
                                  dilation, x.loc);
  }
};
struct linear_fn {
  Tensor operator()(TensorAt x, const Tensor& weight, const Tensor& bias = {}) const {
    Tensor y = x.t.matmul(weight.t(x.loc), x.loc);
    return bias.defined() ? y.add(bias, 1, x.loc) : y;
  }
};
struct batch_norm_fn {
  Tensor operator()(TensorAt x, const Tensor& weight, const Tensor& bias,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    double momentum, double eps, bool cudnn_enabled = true) const {
    return kiln::nn::functional::batch_norm(x.t, running_mean, running_var, weight, bias, training,
                                            momentum, eps, x.loc);
  }
};
struct layer_norm_fn {
  Tensor operator()(TensorAt x, IntList normalized_shape, const Tensor& weight = {},
                    const Tensor& bias = {}, double eps = 1e-5, bool cudnn_enable = true) const {
    return kiln::nn::functional::layer_norm(x.t, normalized_shape.vec(), weight, bias, eps, x.loc);
  }
};
struct embedding_fn {
  // ATen's order: the table first.
  Tensor operator()(TensorAt weight, const Tensor& indices) const {
    return kiln::nn::functional::embedding(indices, weight.t, weight.loc);
  }
};
// Losses with ATen's signatures: an integer reduction (torch::Reduction::Mean).
struct nll_loss_fn {
  Tensor operator()(TensorAt x, const Tensor& target, const Tensor& weight = {},
                    int64_t reduction = Reduction::Mean, int64_t ignore_index = -100) const {
    return kiln::nn::functional::nll_loss(x.t, target, weight, reduction_of(reduction),
                                          ignore_index, x.loc);
  }
};
struct cross_entropy_loss_fn {
  Tensor operator()(TensorAt x, const Tensor& target, const Tensor& weight = {},
                    int64_t reduction = Reduction::Mean, int64_t ignore_index = -100,
                    double label_smoothing = 0.0) const {
    if (weight.defined() && label_smoothing == 0.0)
      return kiln::nn::functional::nll_loss(x.t.log_softmax(1, x.loc), target, weight,
                                            reduction_of(reduction), ignore_index, x.loc);
    if (weight.defined())
      throw kiln::Error("cross_entropy_loss: a class weight with label_smoothing is not supported",
                        kiln::SourceLoc::from(x.loc));
    kiln::nn::CrossEntropyOptions o;
    o.reduction = reduction_of(reduction);
    o.ignore_index = ignore_index;
    o.label_smoothing = label_smoothing;
    return kiln::nn::functional::cross_entropy(x.t, target, o, x.loc);
  }
};
struct binary_cross_entropy_fn {
  Tensor operator()(TensorAt x, const Tensor& target, const Tensor& weight = {},
                    int64_t reduction = Reduction::Mean) const {
    return kiln::nn::functional::binary_cross_entropy(x.t, target, weight, reduction_of(reduction),
                                                      x.loc);
  }
};
struct binary_cross_entropy_with_logits_fn {
  Tensor operator()(TensorAt x, const Tensor& target, const Tensor& weight = {},
                    const Tensor& pos_weight = {}, int64_t reduction = Reduction::Mean) const {
    kiln::nn::Reduction r = reduction_of(reduction);
    if (!weight.defined())
      return kiln::nn::functional::binary_cross_entropy_with_logits(x.t, target, r, pos_weight,
                                                                    x.loc);
    Tensor per = kiln::nn::functional::binary_cross_entropy_with_logits(
        x.t, target, kiln::nn::Reduction::None, pos_weight, x.loc);
    return kiln::nn::apply_reduction(per.mul(weight, x.loc), r, x.loc);
  }
};
struct mse_loss_fn {
  Tensor operator()(TensorAt x, const Tensor& target, int64_t reduction = Reduction::Mean) const {
    return kiln::nn::functional::mse_loss(x.t, target, reduction_of(reduction), x.loc);
  }
};
struct l1_loss_fn {
  Tensor operator()(TensorAt x, const Tensor& target, int64_t reduction = Reduction::Mean) const {
    return kiln::nn::functional::l1_loss(x.t, target, reduction_of(reduction), x.loc);
  }
};
struct smooth_l1_loss_fn {
  Tensor operator()(TensorAt x, const Tensor& target, int64_t reduction = Reduction::Mean,
                    double beta = 1.0) const {
    return kiln::nn::functional::smooth_l1_loss(x.t, target, reduction_of(reduction), beta, x.loc);
  }
};
struct huber_loss_fn {
  Tensor operator()(TensorAt x, const Tensor& target, int64_t reduction = Reduction::Mean,
                    double delta = 1.0) const {
    return kiln::nn::functional::huber_loss(x.t, target, reduction_of(reduction), delta, x.loc);
  }
};

}  // namespace detail

// The function objects (see the file comment).
inline constexpr detail::neg_fn neg{};
inline constexpr detail::rsqrt_fn rsqrt{};
inline constexpr detail::sigmoid_fn sigmoid{};
inline constexpr detail::relu_fn relu{};
inline constexpr detail::sign_fn sign{};
inline constexpr detail::reciprocal_fn reciprocal{};
inline constexpr detail::square_fn square{};
inline constexpr detail::logical_not_fn logical_not{};
inline constexpr detail::t_fn t{};
inline constexpr detail::clone_fn clone{};
inline constexpr detail::contiguous_fn contiguous{};
inline constexpr detail::detach_fn detach{};
inline constexpr detail::silu_fn silu{};
inline constexpr detail::gelu_fn gelu{};
inline constexpr detail::leaky_relu_fn leaky_relu{};
inline constexpr detail::elu_fn elu{};
inline constexpr detail::selu_fn selu{};
inline constexpr detail::hardtanh_fn hardtanh{};
inline constexpr detail::hardswish_fn hardswish{};
inline constexpr detail::hardsigmoid_fn hardsigmoid{};
inline constexpr detail::softplus_fn softplus{};
inline constexpr detail::softmax_fn softmax{};
inline constexpr detail::log_softmax_fn log_softmax{};
inline constexpr detail::dropout_fn dropout{};
inline constexpr detail::feature_dropout_fn feature_dropout{};
inline constexpr detail::add_fn add{};
inline constexpr detail::sub_fn sub{};
inline constexpr detail::mul_fn mul{};
inline constexpr detail::div_fn div{};
inline constexpr detail::eq_fn eq{};
inline constexpr detail::ne_fn ne{};
inline constexpr detail::lt_fn lt{};
inline constexpr detail::le_fn le{};
inline constexpr detail::gt_fn gt{};
inline constexpr detail::ge_fn ge{};
inline constexpr detail::maximum_fn maximum{};
inline constexpr detail::minimum_fn minimum{};
inline constexpr detail::logical_and_fn logical_and{};
inline constexpr detail::logical_or_fn logical_or{};
inline constexpr detail::matmul_fn matmul{};
inline constexpr detail::mm_fn mm{};
inline constexpr detail::bmm_fn bmm{};
inline constexpr detail::outer_fn outer{};
inline constexpr detail::ger_fn ger{};
inline constexpr detail::dot_fn dot{};
inline constexpr detail::addmm_fn addmm{};
inline constexpr detail::mv_fn mv{};
inline constexpr detail::where_fn where{};
inline constexpr detail::masked_fill_fn masked_fill{};
inline constexpr detail::clamp_min_fn clamp_min{};
inline constexpr detail::clamp_max_fn clamp_max{};
inline constexpr detail::sum_fn sum{};
inline constexpr detail::mean_fn mean{};
inline constexpr detail::prod_fn prod{};
inline constexpr detail::amax_fn amax{};
inline constexpr detail::amin_fn amin{};
inline constexpr detail::argmax_fn argmax{};
inline constexpr detail::argmin_fn argmin{};
inline constexpr detail::var_fn var{};
inline constexpr detail::std_fn std{};
inline constexpr detail::logsumexp_fn logsumexp{};
inline constexpr detail::all_fn all{};
inline constexpr detail::any_fn any{};
inline constexpr detail::cumsum_fn cumsum{};
inline constexpr detail::argsort_fn argsort{};
inline constexpr detail::topk_fn topk{};
inline constexpr detail::reshape_fn reshape{};
inline constexpr detail::flatten_fn flatten{};
inline constexpr detail::squeeze_fn squeeze{};
inline constexpr detail::unsqueeze_fn unsqueeze{};
inline constexpr detail::transpose_fn transpose{};
inline constexpr detail::permute_fn permute{};
inline constexpr detail::narrow_fn narrow{};
inline constexpr detail::select_fn select{};
inline constexpr detail::index_select_fn index_select{};
inline constexpr detail::gather_fn gather{};
inline constexpr detail::scatter_add_fn scatter_add{};
inline constexpr detail::scatter_fn scatter{};
inline constexpr detail::flip_fn flip{};
inline constexpr detail::roll_fn roll{};
inline constexpr detail::chunk_fn chunk{};
inline constexpr detail::split_fn split{};
inline constexpr detail::tril_fn tril{};
inline constexpr detail::triu_fn triu{};
inline constexpr detail::cat_fn cat{};
inline constexpr detail::stack_fn stack{};
inline constexpr detail::max_pool2d_fn max_pool2d{};
inline constexpr detail::avg_pool2d_fn avg_pool2d{};
inline constexpr detail::adaptive_avg_pool2d_fn adaptive_avg_pool2d{};
inline constexpr detail::conv2d_fn conv2d{};
inline constexpr detail::conv_transpose2d_fn conv_transpose2d{};
inline constexpr detail::linear_fn linear{};
inline constexpr detail::batch_norm_fn batch_norm{};
inline constexpr detail::layer_norm_fn layer_norm{};
inline constexpr detail::embedding_fn embedding{};
inline constexpr detail::nll_loss_fn nll_loss{};
inline constexpr detail::cross_entropy_loss_fn cross_entropy_loss{};
inline constexpr detail::binary_cross_entropy_fn binary_cross_entropy{};
inline constexpr detail::binary_cross_entropy_with_logits_fn binary_cross_entropy_with_logits{};
inline constexpr detail::mse_loss_fn mse_loss{};
inline constexpr detail::l1_loss_fn l1_loss{};
inline constexpr detail::smooth_l1_loss_fn smooth_l1_loss{};
inline constexpr detail::huber_loss_fn huber_loss{};

}  // namespace torch
