// The generator's products (tools/fuzz/generator.h): matmul, scaled dot-product
// attention and the adaptive softmax.
#include <cmath>
#include <iterator>

#include "ir/error.h"

#include "tools/fuzz/generator.h"

namespace kiln::fuzz {

bool Generator::matmul() {
  if (r_.chance(0.5)) return r_.chance(0.3) ? adaptive() : attention();
  const int a = pick([](const ValueInfo& v) { return !v.is_bool && !v.shape.empty(); });
  if (a < 0) return false;
  const Shape& s = val(a).shape;
  const int b = pick([&](const ValueInfo& v) {
    auto m = v.is_bool ? std::nullopt : matmul_shape(s, v.shape);
    return m && numel(*m) <= kMaxNumel;
  });
  if (b >= 0 && r_.chance(0.7)) {
    const double nb = val(a).bound * val(b).bound * static_cast<double>(s.back());
    if (nb > kMaxBound) return false;
    const Shape out = *matmul_shape(s, val(b).shape);
    push(Instr{Op::matmul, {a, b}, {}, 0}, s.back() == 0 ? fresh_known(out, 0) : fresh(out, nb));
    return true;
  }
  const double nb = val(a).bound * val(a).bound * static_cast<double>(s.back());
  if (nb > kMaxBound) return false;
  Shape out(s.begin(), s.end() - 1);
  if (s.size() > 1) out.push_back(s[s.size() - 2]);
  push(Instr{Op::matmul_self, {a}, {static_cast<int64_t>(s.size())}, 0},
       s.back() == 0 ? fresh_known(out, 0) : fresh(out, nb));
  return true;
}

bool Generator::attention() {
  const int q = pick([](const ValueInfo& v) { return !v.is_bool && v.shape.size() >= 2; });
  if (q < 0) return false;
  const Shape qs = val(q).shape;
  // (No E or S of 0: a softmax over no keys; batches and L may be 0.)
  if (qs.back() == 0) return false;
  auto lead = [](const Shape& s) { return Shape(s.begin(), s.end() - 2); };
  auto joint = [](const Shape& a, const Shape& b) -> std::optional<Shape> {
    try {
      return broadcast_shapes(a, b);
    } catch (const Error&) {
      return std::nullopt;
    }
  };
  // q itself qualifies as k, and k as v, so both picks succeed.
  const int k = pick([&](const ValueInfo& v) {
    return !v.is_bool && v.shape.size() >= 2 && v.shape.back() == qs.back() &&
           joint(lead(qs), lead(v.shape));
  });
  const Shape ks = val(k).shape, qk = *joint(lead(qs), lead(ks));
  const int64_t length = ks[ks.size() - 2];
  if (length == 0) return false;
  const int v = pick([&](const ValueInfo& x) {
    return !x.is_bool && x.shape.size() >= 2 && x.shape[x.shape.size() - 2] == length &&
           joint(qk, lead(x.shape));
  });
  const Shape vs = val(v).shape;
  Shape out = *joint(qk, lead(vs));
  out.push_back(qs[qs.size() - 2]);
  out.push_back(vs.back());
  if (numel(out) > kMaxNumel) return false;
  const bool causal = r_.chance(0.5), given = r_.chance(0.5);
  static const double scales[] = {0.5, 1.0, 2.0, -0.75, 0.125};
  const double scale =
      given ? scales[r_.below(std::size(scales))] : 1.0 / std::sqrt(static_cast<double>(qs.back()));
  // Scores within +-100: softmax is then well conditioned in f32 too.
  if (std::abs(scale) * val(q).bound * val(k).bound * static_cast<double>(qs.back()) > 100)
    return false;
  int kn = k, vn = v;
  if (length > 1 && r_.chance(0.4)) {
    const int64_t len = r_.range(1, length - 1);
    auto narrow = [&](int a) {
      const Shape& s = val(a).shape;
      const size_t rank = s.size();
      Shape o = s;
      o[rank - 2] = len;
      push(Instr{Op::narrow,
                 {a},
                 {spelled(static_cast<int64_t>(rank) - 2, rank), r_.below(length - len + 1), len},
                 0},
           view_of(a, o));
      return static_cast<int>(vals_.size()) - 1;
    };
    kn = narrow(k);
    vn = narrow(v);
  }
  push(Instr{Op::attention, {q, kn, vn}, {causal ? 1 : 0, given ? 1 : 0}, given ? scale : 0},
       fresh(out, val(v).bound));
  return true;
}

bool Generator::adaptive() {
  const int a = pick([](const ValueInfo& v) {
    return !v.is_bool && v.shape.size() == 2 && v.shape[1] >= 2 && v.shape[0] >= 1;
  });
  if (a < 0) return false;
  const Shape as = val(a).shape;
  const int b = pick([&](const ValueInfo& v) {
    return !v.is_bool && v.shape.size() == 2 && v.shape[1] == as[1] && v.shape[0] >= 1;
  });
  const int64_t rows = as[0], shortlist = as[1] - 1, cluster = val(b).shape[0];
  const double logits = val(a).bound * static_cast<double>(as[1]) *
                        static_cast<double>(std::max<int64_t>(cluster, 1));
  const double nb = 2 * (val(a).bound * static_cast<double>(as[1]) + logits) +
                    std::log(static_cast<double>(shortlist + cluster)) + 1;
  if (nb > kMaxBound) return false;
  const int64_t mode = r_.below(3);  // mixed, all in the shortlist, all in the cluster
  std::vector<int64_t> targets;
  for (int64_t r = 0; r < rows; ++r) {
    const bool in_cluster = mode == 2 || (mode == 0 && r_.chance(0.5));
    targets.push_back(in_cluster ? shortlist + r_.below(cluster) : r_.below(shortlist));
  }
  push(Instr{Op::adaptive, {a, b}, targets, 0}, fresh({rows}, nb));
  return true;
}

bool Generator::baddbmm() {
  const int a = pick([](const ValueInfo& v) { return !v.is_bool && v.shape.size() == 3; });
  if (a < 0) return false;
  const Shape s = val(a).shape;
  const int b = pick([&](const ValueInfo& v) {
    return !v.is_bool && v.shape.size() == 3 && v.shape[0] == s[0] &&
           (v.shape[1] == s[2] || v.shape[2] == s[2]);
  });
  const Shape& t = val(b).shape;
  const bool transposed = t[1] != s[2] || (t[2] == s[2] && r_.chance(0.5));
  const Shape out{s[0], s[1], transposed ? t[1] : t[2]};
  const int c = pick([&](const ValueInfo& v) { return !v.is_bool && broadcastable(v.shape, out); });
  if (c < 0 || numel(out) > kMaxNumel) return false;
  static const double betas[] = {0.0, 1.0, 0.5};
  const double beta = betas[r_.below(3)];
  const int64_t alpha = r_.chance(0.5) ? 1 : -2;
  const double nb = beta * val(c).bound + std::abs(double(alpha)) * val(a).bound * val(b).bound *
                                              static_cast<double>(s[2]);
  if (nb > kMaxBound) return false;
  push(Instr{Op::baddbmm, {c, a, b}, {alpha, transposed ? 1 : 0}, beta},
       s[2] == 0 && beta == 0 ? fresh_known(out, 0) : fresh(out, nb));
  return true;
}

}  // namespace kiln::fuzz
