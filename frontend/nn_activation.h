// libtorch's activations that nn.h and nn_extra.h do not have: LogSigmoid,
// Softmin, Tanhshrink, Softshrink, Hardshrink, Threshold, CELU, GLU, Hardsigmoid
// and Hardswish, with
// their options and functional forms, and the modules of two functions
// nn_parity.h has (ReLU6, Softsign). Each is a composite of table ops
// (frontend/nn_activation.cpp); at a kink the gradient is PyTorch's (a
// comparison that is strict where PyTorch's is).
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "frontend/nn.h"

namespace kiln::nn {

namespace functional {

/// log(sigmoid(x)), computed as min(x, 0) - log1p(exp(-|x|)).
Tensor logsigmoid(const Tensor& x, KILN_LOC);
/// softmax(-x) along dim.
Tensor softmin(const Tensor& x, int64_t dim, KILN_LOC);
/// x - tanh(x).
Tensor tanhshrink(const Tensor& x, KILN_LOC);
/// x - lambda where x > lambda, x + lambda where x < -lambda, else 0.
Tensor softshrink(const Tensor& x, double lambda = 0.5, KILN_LOC);
/// x where |x| > lambda, else 0.
Tensor hardshrink(const Tensor& x, double lambda = 0.5, KILN_LOC);
/// x where x > threshold, else value.
Tensor threshold(const Tensor& x, double threshold, double value, KILN_LOC);
/// max(0, x) + min(0, alpha (exp(x / alpha) - 1)).
Tensor celu(const Tensor& x, double alpha = 1.0, KILN_LOC);
/// a * sigmoid(b), a and b the two halves of x along dim (of even size).
Tensor glu(const Tensor& x, int64_t dim = -1, KILN_LOC);
/// 0 for x <= -3, 1 for x >= 3, x / 6 + 1/2 between (gradient 1/6 strictly inside).
Tensor hardsigmoid(const Tensor& x, KILN_LOC);
/// 0 for x < -3, x for x > 3, x (x + 3) / 6 between (gradient x / 3 + 1/2 on
/// [-3, 3], as PyTorch's).
Tensor hardswish(const Tensor& x, KILN_LOC);

}  // namespace functional

/// Options of the activations with a parameter. inplace is accepted; the
/// result is the same.
struct ReLU6Options {
  ReLU6Options(bool inplace = false) : inplace_(inplace) {}  // NOLINT: implicit, as libtorch
  KILN_ARG(bool, inplace);
};
struct SoftminOptions {
  SoftminOptions(int64_t dim) : dim_(dim) {}  // NOLINT: implicit, as libtorch
  KILN_ARG(int64_t, dim);
};
struct SoftshrinkOptions {
  SoftshrinkOptions(double lambda = 0.5) : lambda_(lambda) {}  // NOLINT: implicit, as libtorch
  KILN_ARG(double, lambda);
};
using HardshrinkOptions = SoftshrinkOptions;
struct ThresholdOptions {
  ThresholdOptions(double threshold, double value) : threshold_(threshold), value_(value) {}
  KILN_ARG(double, threshold);
  KILN_ARG(double, value);
  KILN_ARG(bool, inplace) = false;
};
struct CELUOptions {
  KILN_ARG(double, alpha) = 1.0;
  KILN_ARG(bool, inplace) = false;
};
struct GLUOptions {
  GLUOptions(int64_t dim = -1) : dim_(dim) {}  // NOLINT: implicit, as libtorch
  KILN_ARG(int64_t, dim);
};

/// A module calling one activation with its options.
template <class Options>
class ActivationImpl : public Module {
 public:
  using Fn = Tensor (*)(const Tensor&, const Options&, Loc);
  ActivationImpl(const char* name, Fn fn, const Options& options)
      : Module(name), options(options), fn_(fn) {}
  Tensor forward(const Tensor& x, KILN_LOC) { return fn_(x, options, loc); }
  Options options;

 private:
  Fn fn_;
};
struct NoOptions {};

// Name##Impl takes its options, or the options' constructor arguments
// (libtorch's Threshold(0.1, 20)).
#define KILN_ACTIVATION_MODULE(Name, Options)                                    \
  class Name##Impl : public ActivationImpl<Options> {                            \
   public:                                                                       \
    template <class... A>                                                        \
      requires std::is_constructible_v<Options, A...>                            \
    explicit Name##Impl(A&&... a)                                                \
        : ActivationImpl<Options>(#Name, &Name##Impl::call,                      \
                                  Options(std::forward<A>(a)...)) {}             \
    static Tensor call(const Tensor& x, const Options& o, Loc l);                \
  };                                                                             \
  using Name = ModuleHolder<Name##Impl>;
KILN_ACTIVATION_MODULE(ReLU6, ReLU6Options)
KILN_ACTIVATION_MODULE(Softsign, NoOptions)
KILN_ACTIVATION_MODULE(LogSigmoid, NoOptions)
KILN_ACTIVATION_MODULE(Softmin, SoftminOptions)
KILN_ACTIVATION_MODULE(Tanhshrink, NoOptions)
KILN_ACTIVATION_MODULE(Softshrink, SoftshrinkOptions)
KILN_ACTIVATION_MODULE(Hardshrink, HardshrinkOptions)
KILN_ACTIVATION_MODULE(Threshold, ThresholdOptions)
KILN_ACTIVATION_MODULE(CELU, CELUOptions)
KILN_ACTIVATION_MODULE(GLU, GLUOptions)
KILN_ACTIVATION_MODULE(Hardsigmoid, NoOptions)
KILN_ACTIVATION_MODULE(Hardswish, NoOptions)
#undef KILN_ACTIVATION_MODULE

}  // namespace kiln::nn
