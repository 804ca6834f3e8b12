// Pooling over sequences (frontend/nn_pool1d.h): x [N, C, L] viewed as
// [N, C, 1, L] (an unbatched [C, L] as [C, 1, L]), pooled by the 2-d form with
// a window of height 1, and viewed back.
#include "frontend/nn_pool1d.h"

#include "frontend/dispatch.h"
#include "frontend/nn_extra.h"

namespace kiln::nn {

using detail::here;

namespace functional {

namespace {

// f applied to x [N, C, L] or [C, L] viewed with a height-1 dim before its last.
template <class F>
Tensor as_2d(const Tensor& x, const char* op, Loc l, F f) {
  if (x.dim() != 2 && x.dim() != 3)
    throw Error(std::string(op) + ": expected an input [N, C, L] or [C, L], got " +
                    shape_str(x.sizes()),
                here(l));
  return f(x.unsqueeze(x.dim() - 1, l)).squeeze(x.dim() - 1, l);
}

}  // namespace

Tensor max_pool1d(const Tensor& x, const MaxPool1dFuncOptions& o, Loc l) {
  return as_2d(x, "max_pool1d", l, [&](const Tensor& x2) {
    return kiln::max_pool2d(x2, {1, o.kernel_size()},
                            ExpandingArray2({1, o.stride().value_or(o.kernel_size())}),
                            {0, o.padding()}, {1, o.dilation()}, o.ceil_mode(), l);
  });
}

Tensor avg_pool1d(const Tensor& x, const AvgPool1dFuncOptions& o, Loc l) {
  return as_2d(x, "avg_pool1d", l, [&](const Tensor& x2) {
    return kiln::avg_pool2d(x2, {1, o.kernel_size()},
                            ExpandingArray2({1, o.stride().value_or(o.kernel_size())}),
                            {0, o.padding()}, o.ceil_mode(), o.count_include_pad(), l);
  });
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size, Loc l) {
  return as_2d(x, "adaptive_avg_pool1d", l, [&](const Tensor& x2) {
    return kiln::adaptive_avg_pool2d(x2, {1, output_size}, l);
  });
}

Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size, Loc l) {
  return as_2d(x, "adaptive_max_pool1d", l, [&](const Tensor& x2) {
    return adaptive_max_pool2d(x2, {1, output_size}, l);
  });
}

}  // namespace functional

Tensor MaxPool1dImpl::forward(const Tensor& x, Loc l) { return functional::max_pool1d(x, options, l); }
std::string MaxPool1dImpl::repr() const {
  return "MaxPool1d(kernel_size=" + std::to_string(options.kernel_size()) +
         ", stride=" + std::to_string(options.stride().value_or(options.kernel_size())) +
         ", padding=" + std::to_string(options.padding()) + ")";
}

Tensor AvgPool1dImpl::forward(const Tensor& x, Loc l) { return functional::avg_pool1d(x, options, l); }
std::string AvgPool1dImpl::repr() const {
  return "AvgPool1d(kernel_size=" + std::to_string(options.kernel_size()) +
         ", stride=" + std::to_string(options.stride().value_or(options.kernel_size())) +
         ", padding=" + std::to_string(options.padding()) + ")";
}

Tensor AdaptiveAvgPool1dImpl::forward(const Tensor& x, Loc l) {
  return functional::adaptive_avg_pool1d(x, options.output_size(), l);
}
std::string AdaptiveAvgPool1dImpl::repr() const {
  return "AdaptiveAvgPool1d(output_size=" + std::to_string(options.output_size()) + ")";
}

Tensor AdaptiveMaxPool1dImpl::forward(const Tensor& x, Loc l) {
  return functional::adaptive_max_pool1d(x, options.output_size(), l);
}
std::string AdaptiveMaxPool1dImpl::repr() const {
  return "AdaptiveMaxPool1d(output_size=" + std::to_string(options.output_size()) + ")";
}

}  // namespace kiln::nn
