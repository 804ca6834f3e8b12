// The conformance matrix's cases for real models (cases.cpp has the op table's
// and the conventions'): rounding and scans, joining and indexing, activations,
// normalisation, losses, dropout, convolution and pooling, products and sorting.
#include <cmath>

#include "case_helpers.h"
#include "frontend/dispatch.h"

namespace kiln::conformance {

// The ops real models need: rounding and scans, joining and indexing,
// activations, normalisation, classifier losses, dropout (its draws are the same
// stream in every mode: run_case seeds the generator before every call).
std::vector<Case> model_cases() {
  using namespace nn::functional;
  return {
      unary(
          "log1p and expm1", [](const Tensor& x) { return x.log1p() + log1p(x * 0.5) * x.expm1(); },
          in({3, 4}, -0.5, 1)),
      unary(
          "floor, ceil, round, trunc",
          [](const Tensor& x) {
            Tensor y = x * 3;
            return y.floor() + 2 * y.ceil() + 3 * y.round() + 4 * y.trunc() + x;
          },
          given({6}, {-1.25, -0.55, 0.4, 0.6, 0.84, 1.3})),
      unary(
          "reciprocal and square", [](const Tensor& x) { return x.reciprocal() + x.square(); },
          positive({3, 4})),
      binary(
          "fmod and remainder",
          [](auto& a, auto& b) { return a.fmod(b) + 2 * a.remainder(b) + a.fmod(0.3); },
          given({4}, {-1.7, -0.4, 0.45, 1.65}), given({4}, {0.5, -0.7, 0.6, -0.45})),
      no_fd(unary(
          "isnan, isinf, isfinite, all, any",
          [](const Tensor& x) {
            Tensor y = x.log();  // NaN below 0, -inf at 0
            const DType d = x.dtype();
            return y.isnan().to(d) + 2 * y.isinf().to(d) + 3 * y.isfinite().to(d) +
                   x.gt(0).all(1, true).to(d) + 4 * x.gt(0).any().to(d) + x;
          },
          given({2, 3}, {-1, 0, 1, 2, 3, 4}))),
      unary(
          "logsumexp",
          [](const Tensor& x) {
            return x.logsumexp(1) + logsumexp(x, {0, 1}, true);
          },
          in({3, 5}, -3, 3)),
      unary(
          "norm: p = 2, 1, 3 over dims",
          [](const Tensor& x) { return x.norm() + x.norm(1, {1}) + x.norm(3, {0}, true).sum(); },
          in({3, 4})),
      unary(
          "cumsum", [](const Tensor& x) { return x.cumsum(1) + cumsum(x, 0) * 2; }, in({3, 5})),
      unary(
          "cumsum of long rows, fused with its producer and consumer",
          [](const Tensor& x) { return (x.exp() * 0.5).cumsum(1).tanh() + x.cumsum(0); },
          in({3, 300})),
      unary(
          "cumprod", [](const Tensor& x) { return x.cumprod(1) + cumprod(x.t(), 1).t() * 0.5; },
          in({3, 5}, 0.5, 1.5)),
      unary(
          "cumprod through zeros (exact gradient at and after the first zero)",
          [](const Tensor& x) { return x.cumprod(1); },
          given({2, 5}, {0.5, 0, 1.5, 0, 2, -1.2, 0.8, 0, 1.1, 0.9})),
      unary(
          "logcumsumexp",
          [](const Tensor& x) { return x.logcumsumexp(1) + logcumsumexp(x * 3, 0); },
          in({4, 6}, -4, 4)),
      no_fd(unary(
          "scans along lines long enough to fold in chunks (ir/scan_chunks.h), and their "
          "reverse-scan gradients",
          [](const Tensor& x) {
            return x.cumsum(1) * 1e-3 + x.logcumsumexp(1) + (x * 1e-4 + 1).cumprod(1);
          },
          in({2, 70000}, 0.5, 1.5))),
      binary(
          "logaddexp",
          [](auto& a, auto& b) { return a.logaddexp(b) + logaddexp(a * 20, b.sum(0)); },
          in({3, 4}, -3, 3), in({3, 4}, -3, 3)),
      binary(
          "atan2 and hypot, every quadrant, broadcast",
          [](auto& a, auto& b) {
            return a.atan2(b) + atan2(b.sum(0), a) * hypot(a, b.exp()) + a.hypot(b);
          },
          in({3, 4}, -2, 2), in({4}, -2, 2)),
      unary(
          "var and std over one int dim",
          [](const Tensor& x) { return x.var(1) + x.std(0, false).sum(); }, in({4, 5})),
      binary(
          "cat and stack",
          [](auto& a, auto& b) {
            return cat({a, b.exp(), a * 2}, 1).sum(0) + stack({a.sum(1), b.sum(1)}, 1).sum();
          },
          in({3, 2}), in({3, 4})),
      unary(
          "chunk and split",
          [](const Tensor& x) {
            auto c = x.chunk(3, 1);
            auto s = x.split(std::vector<int64_t>{1, 3}, 0);
            return (c[0] * c[2] + c[1].exp()).sum(1) + s[1].sum(1).sum() + s[0].sum();
          },
          in({4, 6})),
      unary(
          "tril and triu",
          [](const Tensor& x) { return x.tril() * 2 + x.triu(1).exp() + tril(x, -1); },
          in({2, 4, 4})),
      binary(
          "masked_fill with a causal mask",
          [](auto& a, auto&) {
            Tensor causal = ones({4, 4}, TensorOptions(kBool).device(a.device())).triu(1);
            return a.masked_fill(causal, -1e9).softmax(-1);
          },
          in({2, 4, 4}), in({1})),
      unary(
          "interpolate: nearest, linear, bilinear with and without aligned corners",
          [](const Tensor& x) {
            using nn::InterpolateMode;
            using nn::InterpolateOptions;
            using nn::functional::interpolate;
            const InterpolateOptions twice = InterpolateOptions().scale_factor({2.0});
            const InterpolateOptions aligned =
                InterpolateOptions().size({4, 6}).align_corners(true);
            const InterpolateOptions linear = InterpolateOptions().scale_factor({1.5});
            return interpolate(x, InterpolateOptions().size({5, 7})).sum() +
                   interpolate(x, InterpolateOptions(twice).mode(InterpolateMode::Bilinear))
                       .exp()
                       .sum() +
                   interpolate(x, InterpolateOptions(aligned).mode(InterpolateMode::Bilinear))
                       .pow(2)
                       .sum() +
                   interpolate(x.flatten(2),
                               InterpolateOptions(linear).mode(InterpolateMode::Linear))
                       .sin()
                       .sum();
          },
          in({2, 2, 3, 4})),
      binary(
          "huber_loss and a mask made with & | ~",
          [](auto& a, auto& b) {
            const Tensor mask = (a.gt(0) & b.lt(0.5)) | ~a.lt(1.5);
            return nn::functional::huber_loss(a, b, nn::Reduction::Mean, 0.7) +
                   where(mask, a * b, a - b).sum();
          },
          in({3, 4}), in({3, 4})),
      Case{"index_select and embedding",
           {in({5, 3}), indices({4}, 5)},
           [](V v) {
             return v[0].index_select(0, v[1]) * 2 +
                    embedding(v[1].reshape({2, 2}), v[0]).reshape({4, 3}) +
                    v[0].index_select(1, v[1].remainder(3)).sum(0, true).t();
           }},
      Case{"embedding rows and their gradient (a blocked scatter_add), index_add",
           {in({6, 16}), indices({5}, 6), in({5, 16})},
           [](V v) {
             Tensor e = embedding(v[1].reshape({5, 1}), v[0]).squeeze(1);  // [5, 16], repeated rows
             return (e * v[2]).tanh() + v[0].index_add(0, v[1], v[2] * 0.5).narrow(0, 1, 5);
           }},
      Case{"scatter_add along dim 0 of a transposed input, repeated and narrower indices",
           {in({4, 3}), indices({2, 3}, 3), in({3, 3})},
           [](V v) {
             Tensor base = v[0].t();  // [3, 4]: a view, read with its strides
             return base.scatter_add(0, v[1].narrow(1, 0, 2), v[2]).exp() +
                    base.gather(0, v[1]).sum();
           }},
      Case{"gather and scatter_add",
           {in({3, 5}), indices({3, 4}, 5)},
           [](V v) {
             Tensor g = v[0].gather(1, v[1]);
             return g.exp() + v[0].scatter_add(1, v[1], g * g).sum(1, true);
           }},
      unary(
          "basic indexing: slices, integers, None, Ellipsis",
          [](const Tensor& x) {
            using namespace indexing;
            return x.index({Slice(1, None), 0}).sum(0) * 2 +
                   x.index({Ellipsis, Slice(None, 3), 1}).sum() +
                   x.index({None, 2, Slice(), 3}).sum();
          },
          in({3, 4, 5})),
      unary(
          "silu, gelu (tanh), leaky_relu, softplus",
          [](const Tensor& x) {
            return silu(x) + gelu(x, "tanh") * 2 + leaky_relu(x, 0.2) + softplus(x * 5, 2.0, 4.0);
          },
          given({6}, {-2.5, -1.1, -0.3, 0.2, 0.9, 2.7})),
      Case{"layer_norm",
           {in({3, 2, 8}), in({2, 8}), in({2, 8})},
           [](V v) {
             return layer_norm(v[0], {2, 8}, v[1], v[2]);
           }},
      Case{"batch_norm, training, with running statistics",
           {in({4, 3, 2, 2}), in({3}), in({3})},
           [](V v) {
             const TensorOptions o = TensorOptions(v[0].dtype()).device(v[0].device());
             Tensor mean = zeros({3}, o), var = ones({3}, o);
             Tensor y = batch_norm(v[0], mean, var, v[1], v[2], true, 0.1);
             // Evaluation mode with other statistics: the updated running ones
             // are detached, so finite differences would see through them.
             Tensor m2 = full({3}, 0.1, o), v2 = full({3}, 2.0, o);
             return y + batch_norm(v[0], m2, v2, Tensor(), Tensor(), false).sum();
           }},
      Case{"nll_loss with ignore_index",
           {in({4, 5}, -2, 2), indices({4}, 5)},
           [](V v) {
             const TensorOptions i = TensorOptions(kInt64).device(v[1].device());
             Tensor t = where(v[1].eq(1), full({}, -100, i), v[1]);  // class 1 is ignored
             return nll_loss(v[0].log_softmax(1), t, nn::Reduction::Mean);
           }},
      Case{"cross entropy with label smoothing",
           {in({4, 5}, -2, 2), indices({4}, 5)},
           [](V v) {
             nn::CrossEntropyOptions o;
             o.label_smoothing = 0.1;
             return cross_entropy(v[0], v[1], o);
           }},
      // The adaptive softmax's computation (nn::AdaptiveLogSoftmaxWithLoss with its
      // weights passed): head with a bias, clusters of 3 and 3 classes projected to 4
      // and 2 features, all 120 weights in one captured tensor.
      Case{"adaptive log-softmax: output, loss and log_prob (AdaptiveLogSoftmaxWithLoss)",
           {in({6, 8}), in({120}), indices({6}, 10)},
           [](V v) {
             int64_t at = 0;
             auto take = [&](Shape s) {
               Tensor w = v[1].narrow(0, at, numel(s)).reshape(s);
               at += numel(s);
               return w;
             };
             const Tensor hw = take({6, 8}), hb = take({6});
             const nn::functional::AdaptiveTail tail{{take({4, 8}), take({3, 4})},
                                                     {take({2, 8}), take({3, 2})}};
             const nn::ASMoutput r =
                 nn::functional::adaptive_log_softmax_with_loss(v[0], v[2], hw, hb, tail);
             const Tensor lp = nn::functional::adaptive_log_prob(v[0], hw, hb, tail);
             return cat({r.output, r.loss.reshape({1}), lp.reshape({-1})}, 0);
           }},
      binary(
          "binary cross entropy, with logits",
          [](auto& a, auto& b) {
            Tensor y = b.gt(0).to(a.dtype());
            return binary_cross_entropy(a.sigmoid(), y) +
                   binary_cross_entropy_with_logits(a * 3, y, nn::Reduction::Sum) +
                   binary_cross_entropy_with_logits(a, y, nn::Reduction::Mean, b.abs() + 0.5);
          },
          in({3, 4}), in({3, 4})),
      unary(
          "dropout (the same draws in every mode)",
          [](const Tensor& x) { return dropout(x.exp(), 0.3, true) + dropout(x, 0.5, false); },
          in({6, 5})),
      unary("rand, randn and randint inside the function",
            [](const Tensor& x) {
              const TensorOptions o = TensorOptions(x.dtype()).device(x.device());
              return x * rand({3, 4}, o) + randn({4}, o) +
                     randint(0, 5, {3, 1}, TensorOptions(kInt64).device(x.device())).to(x.dtype());
            }),
      unary("randint over a range wider than 2^63, and a generator seeded inside the function",
            [](const Tensor& x) {
              const TensorOptions o = TensorOptions(x.dtype()).device(x.device());
              const TensorOptions i = TensorOptions(kInt64).device(x.device());
              Generator g(x.device());
              g.manual_seed(5);
              // A quarter of first attempts are rejected over 3 * 2^62 values.
              Tensor wide = randint(INT64_MIN, int64_t(1) << 62, {3, 1}, i).remainder(1000);
              return x * rand({3, 4}, g, o) + randn({4}, g, o) + wide.to(x.dtype()) +
                     randint(-7, 7, {4}, g, i).to(x.dtype());
            }),
  };
}

// Convolution and pooling (frontend/nn_conv.cpp): im2col windows from movement
// ops, a GEMM, window reductions.
std::vector<Case> conv_cases() {
  return {
      Case{"conv2d: padding 1, bias",
           {in({2, 1, 5, 5}), in({3, 1, 3, 3}), in({3})},
           [](V v) { return conv2d(v[0], v[1], v[2], 1, 1).tanh(); }},
      Case{"conv2d: stride, dilation, groups",
           {in({1, 4, 7, 6}), in({4, 2, 2, 3})},
           [](V v) {
             return conv2d(v[0], v[1], Tensor(), {2, 1}, {1, 0}, {2, 1}, 2);
           }},
      // Traced on the CPU, a 3x3 depthwise conv takes the direct form (a fused sum
      // over each window); eagerly and on CUDA, im2col and a GEMM.
      Case{"conv2d: 3x3 depthwise, stride 2, bias",
           {in({2, 3, 6, 5}), in({3, 1, 3, 3}), in({3})},
           [](V v) {
             return conv2d(v[0], v[1], v[2], {2, 1}, 1, 1, 3).tanh();
           }},
      // Images whose padded rows (18) are long enough for the windows to be
      // read in place by the kernel that uses them (passes/fusion.cpp's
      // recomputable): the patches and their gradient, and the depthwise
      // direct form's, each one kernel.
      Case{"conv2d: padding 1, rows of 18",
           {in({1, 2, 16, 16}), in({2, 2, 3, 3}), in({2})},
           [](V v) { return conv2d(v[0], v[1], v[2], 1, 1).tanh(); }},
      Case{"conv2d: 3x3 depthwise, padding 1, rows of 18",
           {in({1, 2, 16, 16}), in({2, 1, 3, 3}), in({2})},
           [](V v) { return conv2d(v[0], v[1], v[2], 1, 1, 1, 2).tanh(); }},
      // No bias, and 64 images: dx's taps loop over each image's rows and
      // columns, both cut at the pad's edges (codegen/lower.cpp's image form).
      Case{"conv2d: 3x3 depthwise, padding 1, no bias, 64 images",
           {in({32, 2, 6, 7}), in({2, 1, 3, 3})},
           [](V v) { return conv2d(v[0], v[1], Tensor(), 1, 1, 1, 2).tanh(); }},
      // 64 images of rows of 17: y's and dx's taps loop over each image's
      // plane (codegen/lower.cpp's plane form), and dW's sum reads x's pad in
      // place (its plane loop cut where the reads come into bounds).
      Case{"conv2d: 3x3 depthwise, padding 1, 64 images of 16x17",
           {in({32, 2, 16, 17}), in({2, 1, 3, 3}), in({2})},
           [](V v) { return conv2d(v[0], v[1], v[2], 1, 1, 1, 2).tanh(); }},
      unary(
          "max_pool2d: kernel 3, stride 2, padding 1, ceil_mode",
          [](const Tensor& x) { return max_pool2d(x, 3, ExpandingArray2(2), 1, 1, true) * 2; },
          in({1, 2, 6, 5})),
      unary(
          "avg_pool2d (ceil_mode, padding not counted) and adaptive_avg_pool2d",
          [](const Tensor& x) {
            return avg_pool2d(x, 3, ExpandingArray2(2), 1, true, false).sum(1) +
                   adaptive_avg_pool2d(x, {3, 2}).sum();
          },
          in({1, 2, 5, 6})),
  };
}

// Products and sorting (frontend/math_ops.cpp, frontend/sort_ops.cpp): prod as a
// tree of multiplications; sort, argsort, topk, kthvalue, randperm and
// multinomial (its checked weights, topk or searchsorted) through
// the argsort op (the sort library's radix sort, comparison sort and selection;
// values by gather, gradients by scatter_add). Indices are returned as floats.
std::vector<Case> sort_cases() {
  return {
      unary(
          "prod over a dim and all dims, with a zero and negatives",
          [](const Tensor& x) {
            const DType d = x.dtype();
            return x.prod(1) + prod(x, 0, true).sum() * 2 + x.prod() +
                   (x * 3).to(kInt64).prod(1).to(d);
          },
          given({3, 5},
                {0.7, -1.3, 0.9, 1.1, -0.8, 0.6, 0, 1.2, -0.9, 1.4, -1.1, 0.5, 0.8, -1.2, 1.3})),
      unary(
          "prod without zeros, and over an empty dim",
          [](const Tensor& x) { return x.prod(0) + x.narrow(0, 0, 0).prod(0) + x.prod(); },
          in({6, 3}, 0.5, 1.5)),
      unary(
          "sort, ascending and descending, values and indices",
          [](const Tensor& x) {
            const DType d = x.dtype();
            auto [v, i] = x.sort(1);
            auto [dv, di] = sort(x, 0, true);
            return v * 2 + i.to(d) + (dv * 3 + di.to(d)).sum(0, true);
          },
          in({4, 6})),
      no_fd(unary(
          "sort with ties, stable",
          [](const Tensor& x) {
            const DType d = x.dtype();
            auto [v, i] = x.sort(-1);
            auto [dv, di] = x.sort(-1, true);
            return v + i.to(d) * 10 + dv * 100 + di.to(d) * 1000;
          },
          given({2, 6}, {1, 3, 1, 2, 3, 1, 0, 0, -1, 0, 2, -1}))),
      unary(
          "topk, largest and smallest, and argsort",
          [](const Tensor& x) {
            const DType d = x.dtype();
            auto [v, i] = x.topk(3);
            auto [sv, si] = topk(x, 2, 0, false);
            return (v * 2 + i.to(d)).sum(1, true) + (sv * si.to(d).add(1)).sum() +
                   x * x.argsort(1, true).to(d) + argsort(x, 0).to(d);
          },
          in({4, 5})),
      no_fd(unary(
          "sort of long rows (the radix sort) and topk of a few (the selection), ties and NaN",
          [](const Tensor& x) {
            const DType d = x.dtype();
            const Tensor y =
                where(x.gt(2.9), x.log(), (x * 4).round());  // NaN above 2.9, many ties
            auto [v, i] = y.sort(1, true);
            auto [tv, ti] = y.topk(4, 1, false);
            return where(v.isnan(), full_like(v, 7), v).sum(1, true) + i.to(d).narrow(1, 0, 4) +
                   tv + ti.to(d) * 3 + y.argsort(0).to(d).sum(0).narrow(0, 0, 4) * 0.1;
          },
          in({2, 700}))),
      unary(
          "kthvalue and the gradient of sorted values through gather",
          [](const Tensor& x) {
            const DType d = x.dtype();
            auto [v, i] = x.kthvalue(3, 1, true);
            auto [w, j] = kthvalue(x, 2, 0);
            auto [sv, si] = x.sort(0);
            return v * 2 + i.to(d) + (w * w).sum() + j.to(d).sum() + (sv.exp() * sv).sum(0, true);
          },
          in({4, 5})),
      unary(
          "randperm inside the function",
          [](const Tensor& x) {
            const DType d = x.dtype();
            const TensorOptions i = TensorOptions(kInt64).device(x.device());
            return x * randperm(5, i).to(d) + x.index_select(0, randperm(3, i)) +
                   randperm(5, TensorOptions(d).device(x.device()));
          },
          in({3, 5})),
      no_fd(unary(
          "multinomial inside the function, with and without replacement (check_distribution)",
          [](const Tensor& x) {
            const DType d = x.dtype();
            const Tensor w = x.abs() + 0.1;  // every weight positive: a distribution per row
            return x * w.multinomial(5, true).to(d) + w.multinomial(3).to(d).sum(1, true) +
                   multinomial(w.select(0, 0), 2).to(d).sum();
          },
          in({3, 5}))),
  };
}

}  // namespace kiln::conformance
