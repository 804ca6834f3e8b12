// Convolution and pooling as composites of table ops.
//
// The windows of a dim come from movement ops alone (tinygrad's pooling trick):
// a dim of size i is repeated e times, flattened, cut to k (i + d) elements and
// viewed as [k, i + d]; element [a, j * s] of that view is x[a d + j s]
// (the flat position a (i + d) + j s taken mod i), so a strided slice gives
// the [k, out] windows of kernel k, stride s, dilation d. Eagerly that is a copy
// of about k times the input; traced it is index arithmetic inside the kernel
// that reads it. Its gradient (expand's sum, pad for slice) is col2im.
//
//   conv2d               im2col: the [N, C, kH, H', kW, W'] windows as a
//                        [N, groups, C/groups kH kW, H' W'] matrix, times the
//                        weight [groups, O/groups, C/groups kH kW] (one GEMM per
//                        image and group: OpenBLAS or cuBLAS); the bias is the
//                        GEMM's epilogue, which fuses when traced.
//   max_pool2d           the window's first maximum (argmax, then a one-hot sum,
//                        so the gradient goes to that element only)
//   avg_pool2d           the window's sum over a divisor (a number, or a plane
//                        of counts when padding or ceil_mode leave some out)
//   adaptive_avg_pool2d  A_h x A_w^T with bin-averaging matrices (a global mean
//                        for a 1x1 output)
#include "frontend/nn_conv.h"

#include <cmath>
#include <sstream>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/eager_composite.h"
#include "frontend/function.h"
#include "frontend/nn_image.h"
#include "frontend/settings.h"
#include "frontend/trace_state.h"
#include "runtime/allocator.h"

namespace kiln {

using detail::here;

ExpandingArray2::ExpandingArray2(std::initializer_list<int64_t> v) : v_{0, 0} {
  if (v.size() != 2)
    throw Error("expected one size or two (height, width), got " + std::to_string(v.size()));
  v_ = {*v.begin(), *(v.begin() + 1)};
}

std::string ExpandingArray2::str() const {
  std::string s = "(";  // built by appending: GCC 12 warns (falsely) on "(" + std::string
  s += std::to_string(v_[0]);
  s += ", ";
  s += std::to_string(v_[1]);
  return s + ")";
}

namespace {

// A dim's output size, and the padding after it (padding plus what ceil_mode's
// last window reaches past the padded input).
struct Extent {
  int64_t out, high;
};

Extent extent(const std::string& op, const char* what, int64_t size, int64_t k, int64_t s, int64_t p,
              int64_t d, bool ceil_mode, Loc l) {
  // Every step checked: a kernel, dilation or padding near 2^63 is an error
  // naming the call, never a wrapped size.
  const std::string arith = std::string("the ") + what + " of the window (kernel " + std::to_string(k) +
                            ", dilation " + std::to_string(d) + ", padding " + std::to_string(p) + ")";
  try {
    const int64_t span = checked_add(checked_mul(d, k - 1, arith.c_str()), 1, arith.c_str());
    const int64_t padded = checked_add(size, checked_mul(2, p, arith.c_str()), arith.c_str());
    if (padded < span)
      throw Error(op + ": the padded input's " + what + " is " + std::to_string(padded) +
                  ", smaller than the kernel's (dilated) " + what + " " + std::to_string(span));
    const int64_t room = padded - span;
    int64_t out = room / s + 1;
    if (ceil_mode) {
      out = (room == 0 ? 0 : (room - 1) / s + 1) + 1;
      // The last window must start inside the input or its left padding.
      if ((out - 1) >= (size + p - 1) / s + 1) --out;
    }
    const int64_t last = checked_add(checked_mul(out - 1, s, arith.c_str()), span, arith.c_str());
    return {out, p + std::max<int64_t>(0, last - padded)};
  } catch (Error& e) {
    e.attach(here(l), op);
    throw;
  }
}

void check_sizes(const std::string& op, const char* name, ExpandingArray2 v, int64_t min, Loc l) {
  if (v[0] < min || v[1] < min)
    throw Error(op + ": expected " + name + " >= " + std::to_string(min) + ", got " + v.str(),
                here(l));
}

// Parts of a compiled composite's key (eager_composite.h), which also names
// its dump directory: "3x3".
std::string pair_key(ExpandingArray2 v) {
  return std::to_string(v[0]) + "x" + std::to_string(v[1]);
}
std::string shape_key(const Shape& s) {
  std::string k;
  for (size_t i = 0; i < s.size(); ++i) k += (i ? "x" : "") + std::to_string(s[i]);
  return k;
}
const char* conv_algo_name(ConvAlgo a) {
  switch (a) {
    case ConvAlgo::Im2col:
      return "im2col";
    case ConvAlgo::Direct:
      return "direct";
    case ConvAlgo::Auto:
      break;
  }
  return "auto";
}

// Images [N, C, H, W] or one image [C, H, W] (run as a batch of one).
template <class F>
Tensor on_images(const std::string& op, const Tensor& x, Loc l, F f) {
  if (x.dim() == 3) return f(x.unsqueeze(0, l)).squeeze(0, l);
  if (x.dim() != 4)
    throw Error(op + ": expected an input [N, C, H, W] or [C, H, W], got " + shape_str(x.sizes()),
                here(l));
  if (!is_floating(x.dtype()))
    throw Error(op + ": expected a floating input, got " + dtype_name(x.dtype()), here(l));
  return f(x);
}

Tensor pad_dim(const Tensor& x, int64_t dim, int64_t low, int64_t high, Loc l) {
  if (low == 0 && high == 0) return x;
  return detail::apply(OpKind::pad, {x},
                       Attrs{{AttrKey::dim, dim},
                             {AttrKey::low, low},
                             {AttrKey::high, high},
                             {AttrKey::interior, int64_t(0)}},
                       here(l));
}

// x's windows along `dim` at stride 1: k taps d apart, in a new last dim.
Tensor unfold_dim(const Tensor& x, int64_t dim, int64_t k, int64_t d, Loc l) {
  return detail::apply(OpKind::unfold, {x},
                       Attrs{{AttrKey::dim, dim},
                             {AttrKey::size, k},
                             {AttrKey::step, int64_t(1)},
                             {AttrKey::dilation, d}},
                       here(l));
}

// Dims `dim` and dim + 1 padded by p before and e[].high after.
Tensor pad2d(const Tensor& x, int64_t dim, ExpandingArray2 p, const Extent (&e)[2], Loc l) {
  return pad_dim(pad_dim(x, dim, p[0], e[0].high, l), dim + 1, p[1], e[1].high, l);
}

// x [..., i, ...] at dim -> [..., k, out, ...], element [a, j] = x[a d + j s].
// Whether each of `out` windows of k taps (dilation d, stride s) lies inside
// its own stride of a dim of size i: windows()' reshape form.
bool own_stride(int64_t i, int64_t k, int64_t s, int64_t d, int64_t out) {
  return s >= (k - 1) * d + 1 && out * s <= i;
}

// The k strided slices of dim `dim` of x, stacked as dim `at`.
Tensor stacked_taps(const Tensor& x, int64_t dim, int64_t k, int64_t s, int64_t d, int64_t out,
                    int64_t at, Loc l) {
  std::vector<Tensor> taps;
  for (int64_t a = 0; a < k; ++a)
    taps.push_back(x.slice(dim, a * d, a * d + (out - 1) * s + 1, s, l));
  return stack(taps, at, l);
}

Tensor windows(const Tensor& x, int64_t dim, int64_t k, int64_t s, int64_t d, int64_t out, Loc l) {
  const int64_t i = x.size(dim);
  Shape split = x.sizes();
  if (own_stride(i, k, s, d, out)) {
    // Each window inside its own stride: a reshape to [out, s], a strided
    // slice of the taps and a transpose to put them first.
    split[dim] = out;
    split.insert(split.begin() + dim + 1, s);
    return x.slice(dim, 0, out * s, 1, l)
        .reshape(split, l)
        .slice(dim + 1, 0, (k - 1) * d + 1, d, l)
        .transpose(dim, dim + 1, l);
  }
  if (current_trace()) {
    // Traced: the k strided slices stacked. Each window element is one bounds
    // test and load in the fused kernel (the repeat below needs a division per
    // reshape), and the gradient is a fused sum of k pads rather than a
    // reduction over the copies (measured: bench/conv_bench.cpp).
    return stacked_taps(x, dim, k, s, d, out, dim, l);
  }
  const int64_t span = k * (i + d), copies = (span + i - 1) / i;
  Shape repeated = x.sizes(), flat = x.sizes();
  repeated.insert(repeated.begin() + dim, copies);
  flat[dim] = copies * i;
  split[dim] = i + d;
  split.insert(split.begin() + dim, k);
  return x.unsqueeze(dim, l)
      .expand(repeated, l)
      .reshape(flat, l)
      .slice(dim, 0, span, 1, l)
      .reshape(split, l)
      .slice(dim + 1, 0, (out - 1) * s + 1, s, l);
}

// The [N, C, kH, H', kW, W'] windows of x, padded by (top/left, bottom/right).
Tensor windows2d(const Tensor& x, ExpandingArray2 k, ExpandingArray2 s, ExpandingArray2 d,
                 const Extent (&e)[2], ExpandingArray2 p, Loc l) {
  Tensor xp = pad2d(x, 2, p, e, l);
  return windows(windows(xp, 2, k[0], s[0], d[0], e[0].out, l), 4, k[1], s[1], d[1], e[1].out, l);
}

// The same windows as conv2d's patches, [N, C, kH, kW, H', W']. Traced, where
// windows() stacks the width's taps, they are stacked straight into their
// place before H': the gradient then reads the patch gradient in the GEMM's own
// layout, where a permute of windows2d's would copy it (a kernel of its own,
// since each tap reads it at its own places).
Tensor conv_patches(const Tensor& x, ExpandingArray2 k, ExpandingArray2 s, ExpandingArray2 d,
                    const Extent (&e)[2], ExpandingArray2 p, Loc l) {
  const int64_t width = x.size(3) + p[1] + e[1].high;  // padded
  if (!current_trace() || own_stride(width, k[1], s[1], d[1], e[1].out))
    return windows2d(x, k, s, d, e, p, l).permute({0, 1, 2, 4, 3, 5}, l);
  Tensor rows =
      windows(pad2d(x, 2, p, e, l), 2, k[0], s[0], d[0], e[0].out, l);  // [N, C, kH, H', W]
  return stacked_taps(rows, 4, k[1], s[1], d[1], e[1].out, 3, l);
}

// Whether a conv's products run as one tall product over the batch,
// Pt [N H' W', kW kH C] x Wt [kW kH C, O], rather than one W [O, C kH kW] x
// P [C kH kW, H' W'] per image: traced on the CPU, without gradients, one
// group, images of at most kMaxTallPixels output pixels (where each image's
// product is too thin for a GEMM's register blocks) and at least kMinTallChannels
// channels (the patches' rows, channels last, a vector or more). Measured (one
// thread, Zen 3), digits conv2 [64,16,4,4]x[32,16,3,3]: its 64 products of
// [32,144]x[144,16] take 132 us, the tall [1024,144]x[144,32] 96 us, and the
// forward 0.70x main's time; digits conv1 (1 channel, 8x8) 3x slower tall.
// With gradients the tall form's backward (dY permuted, col2im channels last)
// took 1.4x the per-image one's, so training keeps that.
constexpr int64_t kMaxTallPixels = 16, kMinTallChannels = 8;
bool tall_conv(const Tensor& x, int64_t groups, int64_t cols, bool needs_grad) {
  return current_trace() && !x.is_cuda() && !needs_grad && groups == 1 && cols <= kMaxTallPixels &&
         x.size(1) >= kMinTallChannels;
}

// The patches of the tall product, [N, H', W', kW, kH, C]: x seen channels
// last and padded, its height's taps stacked after the width (each tap a row of
// C contiguous values), then its width's taps stacked before them.
Tensor tall_patches(const Tensor& x, ExpandingArray2 k, ExpandingArray2 s, ExpandingArray2 d,
                    const Extent (&e)[2], ExpandingArray2 p, Loc l) {
  Tensor xp = pad2d(x.permute({0, 2, 3, 1}, l), 1, p, e, l);            // [N, Hp, Wp, C]
  Tensor rows = stacked_taps(xp, 1, k[0], s[0], d[0], e[0].out, 3, l);  // [N, H', Wp, kH, C]
  return stacked_taps(rows, 2, k[1], s[1], d[1], e[1].out, 3, l);       // [N, H', W', kW, kH, C]
}

struct PoolGeometry {
  ExpandingArray2 stride;
  Extent e[2];
};

PoolGeometry pool_geometry(const std::string& op, const Tensor& x, ExpandingArray2 k,
                           std::optional<ExpandingArray2> stride, ExpandingArray2 p,
                           ExpandingArray2 d, bool ceil_mode, Loc l) {
  const ExpandingArray2 s = stride.value_or(k);
  check_sizes(op, "kernel_size", k, 1, l);
  check_sizes(op, "stride", s, 1, l);
  check_sizes(op, "dilation", d, 1, l);
  check_sizes(op, "padding", p, 0, l);
  if (2 * p[0] > k[0] || 2 * p[1] > k[1])
    throw Error(op + ": expected padding at most half the kernel size " + k.str() + ", got " +
                    p.str(),
                here(l));
  return {s,
          {extent(op, "height", x.size(2), k[0], s[0], p[0], d[0], ceil_mode, l),
           extent(op, "width", x.size(3), k[1], s[1], p[1], d[1], ceil_mode, l)}};
}

TensorOptions like(const Tensor& x) { return TensorOptions(x.dtype()).device(x.device()); }

// The [n, size] matrix whose row i averages bin i of n over a dim of `size`
// (bin i covers [floor(i size / n), ceil((i + 1) size / n))): the bounds are
// computed on the host, the matrix by comparisons.
Tensor bin_means(int64_t n, int64_t size, const Tensor& x, Loc l) {
  std::vector<double> lo(static_cast<size_t>(n)), hi(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    // i size / n without forming i size (n and size fit in memory, their product may not).
    const auto mul_div = [&](int64_t a, bool up) {
      const __int128 p = static_cast<__int128>(a) * size;
      return static_cast<int64_t>(up ? (p + n - 1) / n : p / n);
    };
    lo[static_cast<size_t>(i)] = static_cast<double>(mul_div(i, false));
    hi[static_cast<size_t>(i)] = static_cast<double>(mul_div(i + 1, true));
  }
  Tensor low = from_vector(lo, {n, 1}, like(x), l), high = from_vector(hi, {n, 1}, like(x), l);
  Tensor j = arange(size, like(x), l);
  Tensor inside = j.ge(low, l).logical_and(j.lt(high, l), l).to(x.dtype(), l);
  return inside.div(high.sub(low, 1, l), l);
}

// The direct form's sum written out term by term when a group has at most this
// many products per output (C/groups kH kW).
constexpr int64_t kMaxTapTerms = 9;

// Whether a conv computes directly, each output a fused sum of its `rows`
// products (C/groups kH kW) read from the windows in place, rather than as
// im2col and a GEMM. Only traced on the CPU, where the windows are index
// arithmetic inside the kernel; eagerly the products would be materialised,
// and CUDA has cuBLAS. By shape (bench/conv_bench.cpp, traced, one thread):
// - with gradients, a depthwise conv of at most 9 taps (one output channel per
//   group) is a GEMV per image and group for BLAS, and direct takes 0.3-0.5 of
//   im2col's time; with more outputs or taps per group the GEMM wins (direct
//   1.1-60x slower);
// - without, any conv of at most kMaxTapTerms products an output is a tap sum
//   (tap_sum), whatever its outputs per group: a GEMM of depth 9 or less is
//   bound by writing its product, and the patches it reads are 9x the input.
//   Direct took 0.37-0.64 of im2col's time ([64,1,8,8]x[16,1,3,3] 0.64,
//   [16,1,64,64]x[64,1,3,3] 0.56, a 1x1 conv of 3 channels to 64 0.37, a 3x3
//   conv of 2 outputs per group 0.58), and 1.03 for [64,1,28,28]x[32,1,3,3].
bool direct_conv(const Tensor& x, int64_t rows, int64_t out_per_group, bool needs_grad) {
  if (!current_trace() || x.is_cuda()) return false;
  switch (settings().conv) {
    case ConvAlgo::Im2col: return false;
    case ConvAlgo::Direct: return true;
    case ConvAlgo::Auto: break;
  }
  return rows <= kMaxTapTerms && (out_per_group == 1 || !needs_grad);
}

// A direct conv as a sum of `rows` shifted slices of the padded input, each
// times its weight broadcast over the output's pixels: [N, G, O/G, H', W'],
// y[n, g, j] = sum over (c, a, b) of xp[n, g C/G + c, a d + h s, b d + w s] w[g O/G + j, c, a, b].
// Every term reads the input along the output's width, so the whole sum (and
// the bias after it) is one elementwise kernel that vectorises over W', where
// the windows' reduction over the taps runs a sum per output and materialises
// the stacked rows (bench_conv's 3x3 depthwise forward, one thread: 13-14 ms
// -> 5 ms). For a conv without gradients only: with them, fusion writes each
// term's dy w out of the weight gradient's reduction kernel and reads it back
// for the input's (nine full-size buffers), and the step took 1.6x the
// windows form's time.
Tensor tap_sum(const Tensor& x, const Tensor& weight, ExpandingArray2 k, ExpandingArray2 s,
               ExpandingArray2 d, const Extent (&e)[2], ExpandingArray2 p, int64_t groups, Loc l) {
  const int64_t n = x.size(0), cg = x.size(1) / groups, og = weight.size(0) / groups;
  Tensor xp = pad2d(x, 2, p, e, l);
  xp = xp.reshape({n, groups, cg, 1, xp.size(2), xp.size(3)}, l);
  Tensor wv = weight.reshape({1, groups, og, cg, k[0], k[1]}, l);
  Tensor y;
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t a = 0; a < k[0]; ++a)
      for (int64_t b = 0; b < k[1]; ++b) {
        Tensor tap = xp.slice(2, c, c + 1, 1, l)
                         .slice(4, a * d[0], a * d[0] + (e[0].out - 1) * s[0] + 1, s[0], l)
                         .slice(5, b * d[1], b * d[1] + (e[1].out - 1) * s[1] + 1, s[1], l)
                         .squeeze(2, l);  // [N, G, 1, H', W']
        Tensor wt = wv.slice(3, c, c + 1, 1, l)
                        .slice(4, a, a + 1, 1, l)
                        .slice(5, b, b + 1, 1, l)
                        .reshape({1, groups, og, 1, 1}, l);
        Tensor term = tap.mul(wt, l);
        y = y.defined() ? y.add(term, 1, l) : term;
      }
  return y;
}

// Where a depthwise conv's windows lie: its kernel, dilation and padding, and
// the output's extents, at stride 1.
struct TapGeometry {
  ExpandingArray2 k, d, p;
  Extent e[2];
  int64_t groups;
  Loc l;
};

// Whether the depthwise conv (one input and one output channel per group, at
// most kMaxTapTerms taps) can take its gradients as tap sums: stride 1, and
// padding the full conv of dY does not crop (p <= d (k - 1)).
bool tap_gradients(int64_t cg, int64_t og, int64_t rows, ExpandingArray2 k, ExpandingArray2 s,
                   ExpandingArray2 d, ExpandingArray2 p) {
  return cg == 1 && og == 1 && rows <= kMaxTapTerms && s[0] == 1 && s[1] == 1 &&
         p[0] <= d[0] * (k[0] - 1) && p[1] <= d[1] * (k[1] - 1);
}

// A depthwise conv computed by taps both ways, with a VJP of its own. Forward,
// the tap sum and the bias. Backward:
// - dx is the full conv of dY with the kernel turned round: the tap sum of dY
//   padded by d (k - 1) - p, one elementwise kernel like the forward's;
// - dW[c, a, b] is the sum over batch and pixels of dY times the input's window
//   (a, b): one reduction over the padded input's windows (unfold), the bias's
//   gradient (the sum of dY) one more row of it.
// The windows form's own autodiff instead wrote the tap products dY w (kH kW
// times the input's size: 75 MB for bench_conv's [32, 64, 32, 32]) out of the
// weight gradient's reduction and read them back for dx.
struct DepthwiseTaps : autograd::Function<DepthwiseTaps> {
  static Tensor forward(autograd::Context* ctx, Tensor x, Tensor weight, TapGeometry g) {
    return forward(ctx, std::move(x), std::move(weight), Tensor(), std::move(g));
  }
  // With a bias [C], added to the tap sum; its gradient comes from dW's reduction.
  static Tensor forward(autograd::Context* ctx, Tensor x, Tensor weight, Tensor bias,
                        TapGeometry g) {
    ctx->save_for_backward({x, weight});
    // [N, C, H' W'] (tap_sum's [N, G, 1, H', W'] with a group's one channel).
    const int64_t n = x.size(0), c = x.size(1);
    Tensor y = tap_sum(x, weight, g.k, {1, 1}, g.d, g.e, g.p, g.groups, g.l)
                   .reshape({n, c, g.e[0].out * g.e[1].out}, g.l);
    if (bias.defined()) y = y.add(bias.reshape({c, 1}, g.l), 1, g.l);
    ctx->saved_data["bias"] = bias.defined();
    ctx->saved_data["geometry"] = std::move(g);
    return y;
  }
  static std::vector<Tensor> backward(autograd::Context* ctx, std::vector<Tensor> grads) {
    const bool has_bias = std::any_cast<bool>(ctx->saved_data["bias"]);
    const auto& g = std::any_cast<const TapGeometry&>(ctx->saved_data["geometry"]);
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    // dY [N, C, H' W'] as the images [N, C, H', W'].
    const Tensor dy =
        grads[0].reshape({grads[0].size(0), grads[0].size(1), g.e[0].out, g.e[1].out}, g.l);
    const Tensor &x = ctx->get_saved_variables()[0], &weight = ctx->get_saved_variables()[1];
    const ExpandingArray2 q{g.d[0] * (g.k[0] - 1) - g.p[0], g.d[1] * (g.k[1] - 1) - g.p[1]};
    const Extent full[2] = {
        extent("conv2d", "height", dy.size(2), g.k[0], 1, q[0], g.d[0], false, g.l),
        extent("conv2d", "width", dy.size(3), g.k[1], 1, q[1], g.d[1], false, g.l)};
    Tensor dx = tap_sum(dy, weight.flip({2, 3}, g.l), g.k, {1, 1}, g.d, full, q, g.groups, g.l);
    // dW in one reduction over batch and pixels of dY times the windows of
    // the input padded as the forward pads it:
    // dW[c, a, b] = sum dY[n, c, i, j] xp[n, c, i + a d, j + b d],
    // the windows [N, C, kH, kW, H', W'] read in place at affine indices
    // (unfold; fusion copies that pad once, as windows repeat its elements);
    // its kH kW taps of a channel are folded in one pass (lower_reduce.cpp's
    // unrolled_rows). dY's pad then serves dx alone, which reads it in place,
    // its rows and columns cut at the pad's edges (codegen/lower_map.cpp,
    // loop_segments). Measured on bench_conv's depthwise step, one thread:
    // windows of dY padded for dx, that pad copied once for both dx and dW,
    // 1.16x this form's time; one reduction per tap, reading the input and dY
    // from memory kH kW times, 1.75x; stacked slices, each element's tap
    // chosen by about 80 integer selects (no vectorising), 68% of the step; H
    // and W as loops of their own, each row's sum a partial one, 1.17x.
    const Tensor xp = pad2d(x, 2, g.p, g.e, g.l);
    const Tensor win = unfold_dim(unfold_dim(xp, 2, g.k[0], g.d[0], g.l), 3, g.k[1], g.d[1], g.l)
                           .slice(2, 0, dy.size(2), 1, g.l)
                           .slice(3, 0, dy.size(3), 1, g.l);
    // The bias's gradient, the sum of dY, is one more row of that reduction:
    // the windows' taps and a tap of ones, the cat's piece per row decided
    // once per row (its index is the unrolled row's constant), so dY is read
    // once for both.
    const int64_t n = dy.size(0), c = dy.size(1), taps = g.k[0] * g.k[1];
    Tensor terms =
        win.permute({0, 1, 4, 5, 2, 3}, g.l).reshape({n, c, taps, dy.size(2), dy.size(3)}, g.l);
    if (has_bias)
      terms = cat({terms, ones({n, c, 1, dy.size(2), dy.size(3)}, like(dy), g.l)}, 2, g.l);
    const Tensor sums = terms.mul(dy.reshape({n, c, 1, dy.size(2), dy.size(3)}, g.l), g.l)
                            .sum({0, 3, 4}, false, g.l);
    if (!has_bias) return {dx.reshape(x.sizes(), g.l), sums.reshape(weight.sizes(), g.l)};
    return {dx.reshape(x.sizes(), g.l), sums.slice(1, 0, taps, 1, g.l).reshape(weight.sizes(), g.l),
            sums.slice(1, taps, taps + 1, 1, g.l).reshape({c}, g.l)};
  }
};

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, ExpandingArray2 stride,
              ExpandingArray2 padding, ExpandingArray2 dilation, int64_t groups, Loc l) {
  const std::string op = "conv2d";
  return on_images(op, input, l, [&](const Tensor& x) {
    if (weight.dim() != 4)
      throw Error(op + ": expected a weight [out, in / groups, kH, kW], got " +
                      shape_str(weight.sizes()),
                  here(l));
    if (weight.dtype() != x.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
      throw Error(op + ": expected weight and bias of the input's dtype " +
                      dtype_name(x.dtype()) + ", got " + dtype_name(weight.dtype()) +
                      (bias.defined() ? std::string(" and ") + dtype_name(bias.dtype()) : ""),
                  here(l));
    const int64_t n = x.size(0), c = x.size(1), o = weight.size(0);
    if (groups < 1 || c % groups != 0 || o % groups != 0 || weight.size(1) * groups != c)
      throw Error(op + ": expected " + std::to_string(c) +
                      " input channels = weight.size(1) * groups, and out channels divisible "
                      "by groups; got weight " +
                      shape_str(weight.sizes()) + ", groups " + std::to_string(groups),
                  here(l));
    if (bias.defined() && bias.sizes() != Shape{o})
      throw Error(op + ": expected a bias [" + std::to_string(o) + "], got " +
                      shape_str(bias.sizes()),
                  here(l));
    const ExpandingArray2 k{weight.size(2), weight.size(3)};
    check_sizes(op, "stride", stride, 1, l);
    check_sizes(op, "dilation", dilation, 1, l);
    check_sizes(op, "padding", padding, 0, l);
    const Extent e[2] = {
        extent(op, "height", x.size(2), k[0], stride[0], padding[0], dilation[0], false, l),
        extent(op, "width", x.size(3), k[1], stride[1], padding[1], dilation[1], false, l)};
    std::vector<Tensor> operands{x, weight};
    if (bias.defined()) operands.push_back(bias);
    if (detail::composite_runs_compiled(operands))
      return detail::compiled_composite(
          op,
          "w" + shape_key(weight.sizes()) + "_s" + pair_key(stride) + "_p" + pair_key(padding) +
              "_d" + pair_key(dilation) + "_g" + std::to_string(groups) +
              (bias.defined() ? "_bias" : "") + "_" + conv_algo_name(settings().conv),
          [=](const std::vector<Tensor>& v) {
            return conv2d(v[0], v[1], v.size() > 2 ? v[2] : Tensor(), stride, padding, dilation,
                          groups, l);
          },
          operands, l);
    const int64_t rows = c / groups * k[0] * k[1], cols = e[0].out * e[1].out;
    const int64_t cg = c / groups, og = o / groups;
    Tensor y;  // [N, G, O/G, H' W']
    // Whether a gradient may flow back through this conv (a traced tensor knows).
    const bool needs_grad = grad_mode_enabled() && (x.requires_grad() || weight.requires_grad() ||
                                                    (bias.defined() && bias.requires_grad()));
    const bool direct = direct_conv(x, rows, og, needs_grad);
    if (direct && rows <= kMaxTapTerms && !needs_grad) {
      y = tap_sum(x, weight, k, stride, dilation, e, padding, groups, l)
              .reshape({n, groups, og, cols}, l);
    } else if (direct && tap_gradients(cg, og, rows, k, stride, dilation, padding)) {
      TapGeometry geometry{k, dilation, padding, {e[0], e[1]}, groups, l};
      y = bias.defined() ? DepthwiseTaps::apply(x, weight, bias, std::move(geometry))
                         : DepthwiseTaps::apply(x, weight, std::move(geometry));
      return y.reshape({n, o, e[0].out, e[1].out}, l);
    } else if (direct) {
      Tensor win = windows2d(x, k, stride, dilation, e, padding, l);  // [N, C, kH, H', kW, W']
      // Each output a sum of `rows` products, read from the windows in place:
      // [N, G, 1, C/G, kH, H', kW, W'] x [1, G, O/G, C/G, kH, 1, kW, 1] summed over C/G, kH, kW.
      Tensor wv = weight.reshape({1, groups, og, cg, k[0], 1, k[1], 1}, l);
      Tensor xv = win.reshape({n, groups, 1, cg, k[0], e[0].out, k[1], e[1].out}, l);
      y = xv.mul(wv, l).sum({3, 4, 6}, false, l).reshape({n, groups, og, cols}, l);
    } else if (tall_conv(x, groups, cols, needs_grad)) {
      Tensor patches =
          tall_patches(x, k, stride, dilation, e, padding, l).reshape({n * cols, rows}, l);
      Tensor wt = weight.permute({3, 2, 1, 0}, l).reshape({rows, o}, l);  // [kW kH C, O]
      Tensor yt = patches.matmul(wt, l).reshape({n, cols, o}, l);
      if (bias.defined()) yt = yt.add(bias, 1, l);
      return yt.permute({0, 2, 1}, l).reshape({n, o, e[0].out, e[1].out}, l);
    } else {
      Tensor patches = conv_patches(x, k, stride, dilation, e, padding, l)
                           .reshape({n, groups, rows, cols}, l);
      y = weight.reshape({groups, og, rows}, l).matmul(patches, l);
    }
    if (bias.defined()) y = y.add(bias.reshape({groups, og, 1}, l), 1, l);
    return y.reshape({n, o, e[0].out, e[1].out}, l);
  });
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups, Loc l) {
  if (input.dim() != 2 && input.dim() != 3)
    throw Error("conv1d: expected an input [N, C, L] or [C, L], got " + shape_str(input.sizes()),
                here(l));
  if (weight.dim() != 3)
    throw Error("conv1d: expected a weight [out, in / groups, k], got " + shape_str(weight.sizes()),
                here(l));
  // [N, C, L] as [N, C, 1, L] (one image [C, 1, L]): conv2d over a height of 1.
  const Tensor y = kiln::conv2d(input.unsqueeze(-2, l), weight.unsqueeze(2, l), bias, {1, stride},
                                {0, padding}, {1, dilation}, groups, l);
  return y.squeeze(-2, l);
}

Tensor max_pool2d(const Tensor& input, ExpandingArray2 kernel_size,
                  std::optional<ExpandingArray2> stride, ExpandingArray2 padding,
                  ExpandingArray2 dilation, bool ceil_mode, Loc l) {
  const std::string op = "max_pool2d";
  return on_images(op, input, l, [&](const Tensor& x) {
    const PoolGeometry g =
        pool_geometry(op, x, kernel_size, stride, padding, dilation, ceil_mode, l);
    if (detail::composite_runs_compiled({x}))
      return detail::compiled_composite(
          op,
          "k" + pair_key(kernel_size) + "_s" + pair_key(g.stride) + "_p" + pair_key(padding) +
              "_d" + pair_key(dilation) + (ceil_mode ? "_ceil" : ""),
          [=](const std::vector<Tensor>& v) {
            return max_pool2d(v[0], kernel_size, stride, padding, dilation, ceil_mode, l);
          },
          {x}, l);
    Tensor src = x;
    if (padding[0] > 0 || padding[1] > 0 || g.e[0].high > 0 || g.e[1].high > 0) {
      // Pad with -inf: mark the input's plane, pad it like x, fill outside it.
      Tensor plane = ones({x.size(2), x.size(3)}, like(x), l);
      plane = pad2d(plane, 0, padding, g.e, l);
      src = pad2d(x, 2, padding, g.e, l).masked_fill(plane.eq(Scalar(0), l), Scalar(-INFINITY), l);
    }
    const Extent unpadded[2] = {{g.e[0].out, 0}, {g.e[1].out, 0}};
    const int64_t taps = kernel_size[0] * kernel_size[1];
    Tensor w = windows2d(src, kernel_size, g.stride, dilation, unpadded, 0, l)
                   .permute({0, 1, 3, 5, 2, 4}, l)
                   .reshape({x.size(0), x.size(1), g.e[0].out, g.e[1].out, taps}, l);
    Tensor first = w.argmax(-1, true, l).eq(arange(taps, TensorOptions(DType::i64).device(x.device()), l), l);
    return where(first, w, zeros({}, like(x), l), l).sum(-1, false, l);
  });
}

Tensor avg_pool2d(const Tensor& input, ExpandingArray2 kernel_size,
                  std::optional<ExpandingArray2> stride, ExpandingArray2 padding, bool ceil_mode,
                  bool count_include_pad, Loc l) {
  const std::string op = "avg_pool2d";
  return on_images(op, input, l, [&](const Tensor& x) {
    const PoolGeometry g = pool_geometry(op, x, kernel_size, stride, padding, 1, ceil_mode, l);
    if (detail::composite_runs_compiled({x}))
      return detail::compiled_composite(
          op,
          "k" + pair_key(kernel_size) + "_s" + pair_key(g.stride) + "_p" + pair_key(padding) +
              (ceil_mode ? "_ceil" : "") + (count_include_pad ? "_countpad" : ""),
          [=](const std::vector<Tensor>& v) {
            return avg_pool2d(v[0], kernel_size, stride, padding, ceil_mode, count_include_pad, l);
          },
          {x}, l);
    Tensor sums = windows2d(x, kernel_size, g.stride, 1, g.e, padding, l).sum({2, 4}, false, l);
    const bool partial = g.e[0].high > padding[0] || g.e[1].high > padding[1];
    if (!partial && (count_include_pad || (padding[0] == 0 && padding[1] == 0)))
      return sums.div(Scalar(double(kernel_size[0] * kernel_size[1])), l);
    // Counts per window of the positions that count: inside the padded input
    // (count_include_pad) or inside the input itself.
    std::vector<double> counts;
    auto count = [&](int dim, int64_t j) {
      const int64_t lo = j * g.stride[dim] - padding[dim], size = x.size(2 + dim);
      const int64_t min = count_include_pad ? -padding[dim] : 0;
      const int64_t max = count_include_pad ? size + padding[dim] : size;
      return std::max<int64_t>(0, std::min(lo + kernel_size[dim], max) - std::max(lo, min));
    };
    for (int64_t i = 0; i < g.e[0].out; ++i)
      for (int64_t j = 0; j < g.e[1].out; ++j) counts.push_back(double(count(0, i) * count(1, j)));
    return sums.div(from_vector(counts, {g.e[0].out, g.e[1].out}, like(x), l), l);
  });
}

Tensor adaptive_avg_pool2d(const Tensor& input, ExpandingArray2 output_size, Loc l) {
  const std::string op = "adaptive_avg_pool2d";
  return on_images(op, input, l, [&](const Tensor& x) {
    check_sizes(op, "output_size", output_size, 1, l);
    if (output_size[0] == 1 && output_size[1] == 1) return x.mean({2, 3}, true, l);
    // The result and the averaging matrices must fit before their bounds are made.
    try {
      const TensorType out{x.dtype(), {x.size(0), x.size(1), output_size[0], output_size[1]}, x.device()};
      const TensorType bins{x.dtype(), {std::max(output_size[0], output_size[1]), std::max(x.size(2), x.size(3))}, x.device()};
      for (const TensorType& t : {out, bins})
        check_host_bytes(static_cast<size_t>(t.bytes()), "the result " + t.str());
    } catch (Error& e) {
      e.attach(here(l), op);
      throw;
    }
    return bin_means(output_size[0], x.size(2), x, l)
        .matmul(x, l)
        .matmul(bin_means(output_size[1], x.size(3), x, l).t(l), l);
  });
}

namespace nn {

namespace functional {
Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& o, Loc l) {
  return kiln::conv2d(input, weight, o.bias_, o.stride_, o.padding_, o.dilation_, o.groups_, l);
}
Tensor conv1d(const Tensor& input, const Tensor& weight, const Conv1dFuncOptions& o, Loc l) {
  return kiln::conv1d(input, weight, o.bias_, o.stride_, o.padding_, o.dilation_, o.groups_, l);
}
Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& o, Loc l) {
  return kiln::max_pool2d(input, o.kernel_size_, o.stride_, o.padding_, o.dilation_, o.ceil_mode_,
                          l);
}
Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& o, Loc l) {
  return kiln::avg_pool2d(input, o.kernel_size_, o.stride_, o.padding_, o.ceil_mode_,
                          o.count_include_pad_, l);
}
Tensor adaptive_avg_pool2d(const Tensor& input, ExpandingArray2 output_size, Loc l) {
  return kiln::adaptive_avg_pool2d(input, output_size, l);
}
}  // namespace functional

Conv2dImpl::Conv2dImpl(const Conv2dOptions& o) : Module("Conv2d"), options(o) {
  const int64_t in = o.in_channels_, out = o.out_channels_, g = o.groups_;
  if (in <= 0 || out <= 0 || g <= 0 || in % g != 0 || out % g != 0)
    throw Error("Conv2d(" + std::to_string(in) + ", " + std::to_string(out) + ", groups=" +
                std::to_string(g) + "): channel counts must be positive and divisible by groups");
  const ExpandingArray2 k = o.kernel_size_;
  if (k[0] <= 0 || k[1] <= 0) throw Error("Conv2d: kernel_size must be positive, got " + k.str());
  const double bound = 1.0 / std::sqrt(static_cast<double>(in / g * k[0] * k[1]));
  NoGradGuard no_grad;
  weight = register_parameter("weight", rand({out, in / g, k[0], k[1]}) * (2 * bound) - bound);
  if (o.bias_) bias = register_parameter("bias", rand({out}) * (2 * bound) - bound);
}

Tensor Conv2dImpl::forward(const Tensor& x, Loc l) {
  const ExpandingArray2 p = options.padding_;
  if (options.padding_mode_ != PadMode::Constant && (p[0] || p[1]))
    return kiln::conv2d(functional::pad(x, {p[1], p[1], p[0], p[0]}, options.padding_mode_, 0.0, l),
                        weight, bias, options.stride_, 0, options.dilation_, options.groups_, l);
  return kiln::conv2d(x, weight, bias, options.stride_, p, options.dilation_, options.groups_, l);
}

Conv1dImpl::Conv1dImpl(const Conv1dOptions& o) : Module("Conv1d"), options(o) {
  const int64_t in = o.in_channels_, out = o.out_channels_, g = o.groups_, k = o.kernel_size_;
  if (in <= 0 || out <= 0 || g <= 0 || in % g != 0 || out % g != 0)
    throw Error("Conv1d(" + std::to_string(in) + ", " + std::to_string(out) + ", groups=" +
                std::to_string(g) + "): channel counts must be positive and divisible by groups");
  if (k <= 0) throw Error("Conv1d: kernel_size must be positive, got " + std::to_string(k));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in / g * k));
  NoGradGuard no_grad;
  weight = register_parameter("weight", rand({out, in / g, k}) * (2 * bound) - bound);
  if (o.bias_) bias = register_parameter("bias", rand({out}) * (2 * bound) - bound);
}

Tensor Conv1dImpl::forward(const Tensor& x, Loc l) {
  const int64_t p = options.padding_;
  if (options.padding_mode_ != PadMode::Constant && p)
    return kiln::conv1d(functional::pad(x, {p, p}, options.padding_mode_, 0.0, l), weight, bias,
                        options.stride_, 0, options.dilation_, options.groups_, l);
  return kiln::conv1d(x, weight, bias, options.stride_, p, options.dilation_, options.groups_, l);
}

std::string Conv1dImpl::repr() const {
  std::ostringstream s;
  s << "Conv1d(" << options.in_channels_ << ", " << options.out_channels_
    << ", kernel_size=" << options.kernel_size_ << ", stride=" << options.stride_;
  if (options.padding_) s << ", padding=" << options.padding_;
  if (options.dilation_ != 1) s << ", dilation=" << options.dilation_;
  if (options.groups_ != 1) s << ", groups=" << options.groups_;
  if (!options.bias_) s << ", bias=false";
  if (options.padding_mode_ != PadMode::Constant)
    s << ", padding_mode=" << pad_mode_name(options.padding_mode_);
  s << ")";
  return s.str();
}

std::string Conv2dImpl::repr() const {
  std::ostringstream s;
  s << "Conv2d(" << options.in_channels_ << ", " << options.out_channels_
    << ", kernel_size=" << options.kernel_size_.str() << ", stride=" << options.stride_.str();
  if (options.padding_[0] || options.padding_[1]) s << ", padding=" << options.padding_.str();
  if (options.dilation_[0] != 1 || options.dilation_[1] != 1)
    s << ", dilation=" << options.dilation_.str();
  if (options.groups_ != 1) s << ", groups=" << options.groups_;
  if (!options.bias_) s << ", bias=false";
  if (options.padding_mode_ != PadMode::Constant)
    s << ", padding_mode=" << pad_mode_name(options.padding_mode_);
  s << ")";
  return s.str();
}

Tensor MaxPool2dImpl::forward(const Tensor& x, Loc l) { return functional::max_pool2d(x, options, l); }
std::string MaxPool2dImpl::repr() const {
  return "MaxPool2d(kernel_size=" + options.kernel_size_.str() +
         ", stride=" + options.stride_.value_or(options.kernel_size_).str() +
         ", padding=" + options.padding_.str() + ")";
}

Tensor AvgPool2dImpl::forward(const Tensor& x, Loc l) { return functional::avg_pool2d(x, options, l); }
std::string AvgPool2dImpl::repr() const {
  return "AvgPool2d(kernel_size=" + options.kernel_size_.str() +
         ", stride=" + options.stride_.value_or(options.kernel_size_).str() +
         ", padding=" + options.padding_.str() + ")";
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& x, Loc l) {
  return kiln::adaptive_avg_pool2d(x, output_size, l);
}
std::string AdaptiveAvgPool2dImpl::repr() const {
  return "AdaptiveAvgPool2d(output_size=" + output_size.str() + ")";
}

}  // namespace nn
}  // namespace kiln
