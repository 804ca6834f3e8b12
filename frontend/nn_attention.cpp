// scaled_dot_product_attention (frontend/nn.h): the attention op of the table
// (ir/ops.def; runtime/attention.h streams it over blocks of keys), or, with a
// mask or dropout, the composite softmax(q k^T * scale + mask) v that holds
// the scores (as PyTorch's math kernel). And the other streaming-softmax
// library op, cluster_logprob (runtime/cluster_logprob.h), which the adaptive
// softmax (nn_adaptive.cpp) computes each tail cluster with.
#include <cmath>
#include <limits>

#include "frontend/dispatch.h"
#include "frontend/nn.h"

namespace kiln::nn::functional {

using detail::here;

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Loc l) {
  const char* op = "scaled_dot_product_attention";
  if (!q.defined() || !k.defined() || !v.defined())
    throw Error(std::string(op) + ": expected defined q, k and v", here(l));
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2)
    throw Error(
        std::string(op) +
            ": expected q, k and v of rank >= 2 ([..., L, E], [..., S, E], [..., S, Ev]), got " +
            shape_str(q.sizes()) + ", " + shape_str(k.sizes()) + " and " + shape_str(v.sizes()),
        here(l));
  if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw Error(std::string(op) + ": expected floating-point q, k and v of one dtype, got " +
                    dtype_name(q.dtype()) + ", " + dtype_name(k.dtype()) + " and " +
                    dtype_name(v.dtype()),
                here(l));
  if (k.size(-1) != q.size(-1) || v.size(-2) != k.size(-2))
    throw Error(std::string(op) + ": expected k as wide as q and v as long as k, got q " +
                    shape_str(q.sizes()) + ", k " + shape_str(k.sizes()) + ", v " +
                    shape_str(v.sizes()),
                here(l));
  if (dropout_p < 0 || dropout_p >= 1)
    throw Error(
        std::string(op) + ": expected dropout_p in [0, 1), got " + std::to_string(dropout_p),
        here(l));
  if (attn_mask.defined() && is_causal)
    throw Error(std::string(op) + ": expected attn_mask or is_causal, not both (as PyTorch)",
                here(l));
  const double s = scale ? *scale : 1.0 / std::sqrt(double(q.size(-1)));
  if (attn_mask.defined() || dropout_p > 0) {
    Tensor scores = q.matmul(k.transpose(-2, -1, l), l) * s;
    if (attn_mask.defined())
      scores = attn_mask.dtype() == kBool
                   ? scores.masked_fill(attn_mask.logical_not(l),
                                        -std::numeric_limits<double>::infinity(), l)
                   : scores + attn_mask;
    Tensor p = scores.softmax(-1, l);
    if (dropout_p > 0) p = dropout(p, dropout_p, true, l);
    return p.matmul(v, l);
  }
  // Leading dims broadcast (and flatten) to one batch dim; the op takes them equal.
  auto leading = [](const Tensor& t) {
    Shape sh = t.sizes();
    sh.resize(sh.size() - 2);
    return sh;
  };
  const Shape lead = broadcast_shapes(broadcast_shapes(leading(q), leading(k)), leading(v));
  auto full = [&](const Tensor& t) {
    Shape sh = lead;
    sh.push_back(t.size(-2));
    sh.push_back(t.size(-1));
    return t.sizes() == sh ? t : t.expand(sh, l);
  };
  return detail::apply(OpKind::attention, {full(q), full(k), full(v)},
                       {{AttrKey::scale, s}, {AttrKey::causal, int64_t(is_causal)}}, here(l));
}

}  // namespace kiln::nn::functional

namespace kiln::detail {

Tensor cluster_log_prob(const Tensor& h, const Tensor& w, const Tensor& targets, int64_t start,
                        Loc loc) {
  const Tensor t = targets.dtype() == DType::i64 ? targets : targets.to(DType::i64, loc);
  return apply(OpKind::cluster_logprob, {h, w, t}, {{AttrKey::start, start}}, here(loc));
}

}  // namespace kiln::detail
