// Reference kernels for cluster_logprob and cluster_logprob_grad (ir/ops.def):
// every row in turn, in double, from the formulas: a row r is a member when
// start <= t[r] < start + C; then z_j = h_r . w_j, lse = log sum_j exp(z_j),
// out_r = z_{t[r]-start} - lse, d logit_j = g_r (delta(j, t[r] - start) - exp(z_j
// - lse)), dh_r = sum_j d logit_j w_j, dw_j += d logit_j h_r. Any other row is 0
// and adds nothing (its h row is not read). The oracle of the library step
// (runtime/cluster_logprob.cpp). cluster_logprob_grad writes each gradient its
// `which` mask selects (1 h, 2 w) into its part of the flat result, in that order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ir/error.h"
#include "runtime/cluster_logprob.h"
#include "runtime/reference.h"
#include "runtime/reference_impl.h"
#include "runtime/strided_loop.h"

namespace kiln::detail {
namespace {

// A view as dense values of dtype T.
template <class T>
std::vector<T> dense(const View& v, DType dt) {
  std::vector<std::shared_ptr<Storage>> keep;
  View d = scratch(v.shape, dt, keep);
  copy_to(v, d);
  return std::vector<T>(d.ptr<T>(), d.ptr<T>() + v.numel());
}

}  // namespace

void ref_cluster_logprob(OpKind k, const Attrs& attrs, std::span<const View> in, const View& out) {
  auto type = [&](size_t i) { return TensorType{in[i].dtype, in[i].shape, {}}; };
  const ClusterShape s = cluster_logprob_shape(type(0), type(1), attrs);
  const std::vector<double> H = dense<double>(in[0], DType::f64),
                            W = dense<double>(in[1], DType::f64);
  const std::vector<int64_t> t = dense<int64_t>(in[2], DType::i64);
  const bool grad = k == OpKind::cluster_logprob_grad;
  const std::vector<double> G = grad ? dense<double>(in[3], DType::f64) : std::vector<double>{};
  const int64_t which = grad ? attrs.i(AttrKey::which) : 0;
  std::vector<double> result(size_t(out.numel()), 0.0), z(size_t(s.columns));
  double* dh = result.data();
  double* dw = dh + ((which & 1) ? s.rows * s.width : 0);
  for (int64_t r = 0; r < s.rows; ++r) {
    // t - start in [0, columns), without overflow for any int64 t and start.
    const uint64_t rel = uint64_t(t[size_t(r)]) - uint64_t(s.start);
    if (rel >= uint64_t(s.columns)) continue;
    const int64_t target = int64_t(rel);
    const double* h = H.data() + r * s.width;  // not &H[...]: H is empty when width is 0
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t j = 0; j < s.columns; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < s.width; ++c) dot += h[c] * W[size_t(j * s.width + c)];
      z[size_t(j)] = dot;
      mx = std::max(mx, dot);
    }
    for (int64_t j = 0; j < s.columns; ++j) sum += std::exp(z[size_t(j)] - mx);
    const double lse = mx + std::log(sum);
    if (!grad) {
      result[size_t(r)] = z[size_t(target)] - lse;
      continue;
    }
    for (int64_t j = 0; j < s.columns; ++j) {
      const double d = G[size_t(r)] * ((j == target ? 1.0 : 0.0) - std::exp(z[size_t(j)] - lse));
      if (which & 1)
        for (int64_t c = 0; c < s.width; ++c) dh[r * s.width + c] += d * W[size_t(j * s.width + c)];
      if (which & 2)
        for (int64_t c = 0; c < s.width; ++c) dw[j * s.width + c] += d * h[c];
    }
  }
  std::vector<std::shared_ptr<Storage>> keep;
  View res = scratch(out.shape, DType::f64, keep);
  std::copy(result.begin(), result.end(), res.ptr<double>());
  copy_to(res, out);
}

}  // namespace kiln::detail
