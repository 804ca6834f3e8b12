// Reference kernels for attention and attention_grad (ir/ops.def): one query
// row at a time with its whole row of scores, in double, from the formulas
// (p = softmax(scale * q_i k^T), out_i = p v; dv_j = sum_i p_ij g_i, dp = g_i v^T,
// ds = p (dp - g_i . out_i), dq_i = scale ds k, dk_j = scale sum_i ds_ij q_i): the
// oracle of the streaming library step (runtime/attention.cpp). attention_grad
// writes each gradient its `which` mask selects (1 q, 2 k, 4 v) into its part of
// the flat result, in that order.
#include <cmath>
#include <limits>
#include <vector>

#include "ir/error.h"
#include "runtime/attention.h"
#include "runtime/reference.h"
#include "runtime/reference_impl.h"
#include "runtime/strided_loop.h"

namespace kiln::detail {
namespace {

// Operand i as dense doubles.
std::vector<double> dense(const View& v) {
  std::vector<std::shared_ptr<Storage>> keep;
  View d = scratch(v.shape, DType::f64, keep);
  copy_to(v, d);
  return std::vector<double>(d.ptr<double>(), d.ptr<double>() + v.numel());
}

}  // namespace

void ref_attention(OpKind k, const Attrs& attrs, std::span<const View> in, const View& out) {
  auto type = [&](size_t i) { return TensorType{in[i].dtype, in[i].shape, {}}; };
  const AttentionShape s = attention_shape(type(0), type(1), type(2), attrs);
  const std::vector<double> Q = dense(in[0]), K = dense(in[1]), V = dense(in[2]);
  const bool grad = k == OpKind::attention_grad;
  const std::vector<double> O = grad ? dense(in[3]) : std::vector<double>{},
                            G = grad ? dense(in[4]) : std::vector<double>{};
  const int64_t which = grad ? attrs.i(AttrKey::which) : 0;
  std::vector<double> result(size_t(out.numel()), 0.0), p(size_t(s.tk));
  // Where each selected gradient starts in the result (the unselected are not written).
  const int64_t nq = s.batch * s.tq * s.d, nk = s.batch * s.tk * s.d;
  double* dq = result.data();
  double* dk = dq + ((which & 1) ? nq : 0);
  double* dv = dk + ((which & 2) ? nk : 0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.tq; ++i) {
      const double* q = &Q[size_t((b * s.tq + i) * s.d)];
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      const int64_t seen = s.causal ? std::min(s.tk, i + 1) : s.tk;
      for (int64_t j = 0; j < seen; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < s.d; ++c) dot += q[c] * K[size_t((b * s.tk + j) * s.d + c)];
        p[size_t(j)] = s.scale * dot;
        mx = std::max(mx, p[size_t(j)]);
      }
      for (int64_t j = 0; j < seen; ++j) sum += p[size_t(j)] = std::exp(p[size_t(j)] - mx);
      for (int64_t j = 0; j < seen; ++j) p[size_t(j)] /= sum;
      const int64_t row = b * s.tq + i;
      if (!grad) {
        for (int64_t j = 0; j < seen; ++j)
          for (int64_t c = 0; c < s.dv; ++c)
            result[size_t(row * s.dv + c)] += p[size_t(j)] * V[size_t((b * s.tk + j) * s.dv + c)];
        continue;
      }
      double D = 0;
      for (int64_t c = 0; c < s.dv; ++c) D += G[size_t(row * s.dv + c)] * O[size_t(row * s.dv + c)];
      for (int64_t j = 0; j < seen; ++j) {
        const int64_t key = b * s.tk + j;
        double dp = 0;
        for (int64_t c = 0; c < s.dv; ++c)
          dp += G[size_t(row * s.dv + c)] * V[size_t(key * s.dv + c)];
        const double ds = p[size_t(j)] * (dp - D);
        if (which & 1)
          for (int64_t c = 0; c < s.d; ++c)
            dq[row * s.d + c] += s.scale * ds * K[size_t(key * s.d + c)];
        if (which & 2)
          for (int64_t c = 0; c < s.d; ++c) dk[key * s.d + c] += s.scale * ds * q[c];
        if (which & 4)
          for (int64_t c = 0; c < s.dv; ++c)
            dv[key * s.dv + c] += p[size_t(j)] * G[size_t(row * s.dv + c)];
      }
    }
  std::vector<std::shared_ptr<Storage>> keep;
  View r = scratch(out.shape, DType::f64, keep);
  std::copy(result.begin(), result.end(), r.ptr<double>());
  copy_to(r, out);
}

}  // namespace kiln::detail
