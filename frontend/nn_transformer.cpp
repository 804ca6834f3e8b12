// MultiheadAttention and TransformerEncoderLayer (frontend/nn_transformer.h):
// libtorch 1.13's multi_head_attention_forward step by step, in table ops. The
// scores are held ([N * heads, L, S]) as in libtorch, which returns them; a
// caller who needs neither the weights nor masks can use
// scaled_dot_product_attention, which streams.
#include "frontend/nn_transformer.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/nn_parity.h"

namespace kiln::nn {

using detail::here;

namespace {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Loc l) {
  Tensor y = x.matmul(weight.t(l), l);
  return bias.defined() ? y.add(bias, 1, l) : y;
}

Tensor rows(const Tensor& t, int64_t start, int64_t length, Loc l) {
  return t.defined() ? t.narrow(0, start, length, l) : Tensor();
}

// `mask` with one more column of zeros at the end of its last dim (a key appended).
Tensor pad_last(const Tensor& mask, Loc l) {
  if (!mask.defined()) return mask;
  Shape s = mask.sizes();
  s.back() = 1;
  return cat({mask, zeros(s, TensorOptions(mask.dtype()).device(mask.device()), l)}, -1, l);
}

[[noreturn]] void fail(const std::string& what, Loc l) {
  throw Error("MultiheadAttention: " + what, here(l));
}

}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& o)
    : Module("MultiheadAttention"), options(o) {
  const int64_t e = o.embed_dim(), h = o.num_heads();
  if (e <= 0 || h <= 0 || e % h != 0)
    throw Error("MultiheadAttention(" + std::to_string(e) + ", " + std::to_string(h) +
                "): expected embed_dim divisible by a positive num_heads");
  if (o.kdim() <= 0 || o.vdim() <= 0)
    throw Error("MultiheadAttention: expected kdim and vdim > 0, got " + std::to_string(o.kdim()) +
                " and " + std::to_string(o.vdim()));
  if (!(o.dropout() >= 0 && o.dropout() <= 1))
    throw Error("MultiheadAttention: expected dropout in [0, 1], got " +
                std::to_string(o.dropout()));
  head_dim = e / h;
  _qkv_same_embed_dim = o.kdim() == e && o.vdim() == e;
  if (_qkv_same_embed_dim) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
    init::xavier_uniform_(in_proj_weight);
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({e, e}));
    k_proj_weight = register_parameter("k_proj_weight", empty({e, o.kdim()}));
    v_proj_weight = register_parameter("v_proj_weight", empty({e, o.vdim()}));
    for (Tensor* w : {&q_proj_weight, &k_proj_weight, &v_proj_weight}) init::xavier_uniform_(*w);
  }
  if (o.bias()) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * e}));
  if (o.add_bias_kv()) {
    bias_k = register_parameter("bias_k", empty({1, 1, e}));
    bias_v = register_parameter("bias_v", empty({1, 1, e}));
    init::xavier_normal_(bias_k);
    init::xavier_normal_(bias_v);
  }
  out_proj = register_module("out_proj", ModuleHolder<LinearImpl>(e, e, o.bias()));
  if (o.bias()) init::zeros_(out_proj->bias);
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(
    const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_padding_mask,
    bool need_weights, const Tensor& attn_mask, bool average_attn_weights, Loc l) {
  const int64_t e = options.embed_dim(), heads = options.num_heads();
  if (query.dim() != 3 || query.size(2) != e)
    fail("expected a query [L, N, " + std::to_string(e) + "], got " + shape_str(query.sizes()), l);
  if (key.dim() != 3 || value.dim() != 3 || key.size(0) != value.size(0) ||
      key.size(1) != query.size(1) || value.size(1) != query.size(1) ||
      key.size(2) != options.kdim() || value.size(2) != options.vdim())
    fail("expected a key [S, N, " + std::to_string(options.kdim()) + "] and a value [S, N, " +
             std::to_string(options.vdim()) + "] for a query " + shape_str(query.sizes()) +
             ", got " + shape_str(key.sizes()) + " and " + shape_str(value.sizes()),
         l);
  const int64_t len = query.size(0), n = query.size(1);
  Tensor q, k, v;
  if (_qkv_same_embed_dim && query.is_same(key) && key.is_same(value)) {  // self-attention
    std::vector<Tensor> qkv = linear(query, in_proj_weight, in_proj_bias, l).chunk(3, -1, l);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    const Tensor& wq = _qkv_same_embed_dim ? rows(in_proj_weight, 0, e, l) : q_proj_weight;
    const Tensor& wk = _qkv_same_embed_dim ? rows(in_proj_weight, e, e, l) : k_proj_weight;
    const Tensor& wv = _qkv_same_embed_dim ? rows(in_proj_weight, 2 * e, e, l) : v_proj_weight;
    q = linear(query, wq, rows(in_proj_bias, 0, e, l), l);
    k = linear(key, wk, rows(in_proj_bias, e, e, l), l);
    v = linear(value, wv, rows(in_proj_bias, 2 * e, e, l), l);
  }
  q = q.mul(Scalar(1.0 / std::sqrt(static_cast<double>(head_dim))), l);

  Tensor mask = attn_mask, pad = key_padding_mask;
  if (mask.defined() && !is_floating(mask.dtype()))
    fail(std::string(
             "expected a float attn_mask (added to the scores: 0 keeps, -inf blocks), got ") +
             dtype_name(mask.dtype()),
         l);
  if (pad.defined()) {
    if (is_floating(pad.dtype()))
      fail(std::string("expected a bool key_padding_mask (true: the key is ignored), got ") +
               dtype_name(pad.dtype()),
           l);
    if (pad.dtype() != kBool) pad = pad.ne(Scalar(0), l);
  }
  if (bias_k.defined()) {
    k = cat({k, bias_k.repeat({1, n, 1}, l)}, 0, l);
    v = cat({v, bias_v.repeat({1, n, 1}, l)}, 0, l);
    mask = pad_last(mask, l);
    pad = pad_last(pad, l);
  }
  q = q.reshape({len, n * heads, head_dim}, l).transpose(0, 1, l);
  k = k.reshape({-1, n * heads, head_dim}, l).transpose(0, 1, l);
  v = v.reshape({-1, n * heads, head_dim}, l).transpose(0, 1, l);
  if (options.add_zero_attn()) {
    const TensorOptions like = TensorOptions(k.dtype()).device(k.device());
    k = cat({k, zeros({n * heads, 1, head_dim}, like, l)}, 1, l);
    v = cat({v, zeros({n * heads, 1, head_dim}, like, l)}, 1, l);
    mask = pad_last(mask, l);
    pad = pad_last(pad, l);
  }
  const int64_t src = k.size(1);
  if (pad.defined() && pad.sizes() != Shape{n, src})
    fail("expected a key_padding_mask [" + std::to_string(n) + ", " + std::to_string(src) +
             "], got " + shape_str(pad.sizes()),
         l);
  Tensor scores = q.bmm(k.transpose(1, 2, l), l);  // [N * heads, L, S]
  if (mask.defined()) {
    if (mask.sizes() != Shape{len, src} && mask.sizes() != Shape{n * heads, len, src})
      fail("expected an attn_mask [" + std::to_string(len) + ", " + std::to_string(src) + "] or [" +
               std::to_string(n * heads) + ", " + std::to_string(len) + ", " + std::to_string(src) +
               "], got " + shape_str(mask.sizes()),
           l);
    scores = scores.add(mask.to(scores.dtype(), l), 1, l);
  }
  if (pad.defined())
    scores = scores.reshape({n, heads, len, src}, l)
                 .masked_fill(pad.reshape({n, 1, 1, src}, l),
                              Scalar(-std::numeric_limits<double>::infinity()), l)
                 .reshape({n * heads, len, src}, l);
  Tensor weights = scores.softmax(-1, l);
  weights = functional::dropout(weights, options.dropout(), training_for_forward(), l);
  Tensor out = weights.bmm(v, l).transpose(0, 1, l).reshape({len, n, e}, l);
  out = out_proj->forward(out, l);
  if (!need_weights) return {out, Tensor()};
  weights = weights.reshape({n, heads, len, src}, l);
  if (average_attn_weights) weights = weights.sum(1, false, l).div(Scalar(double(heads)), l);
  return {out, weights};
}

std::string MultiheadAttentionImpl::repr() const {
  std::ostringstream s;
  s << "MultiheadAttention(embed_dim=" << options.embed_dim()
    << ", num_heads=" << options.num_heads() << ", dropout=" << options.dropout() << ")";
  return s.str();
}

Tensor TransformerActivation::operator()(const Tensor& x, Loc l) const {
  if (fn_) return fn_(x);
  return kind_ == GELU ? functional::gelu(x, "none", l) : x.relu(l);
}

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& o)
    : Module("TransformerEncoderLayer"), options(o) {
  if (o.d_model() <= 0 || o.dim_feedforward() <= 0)
    throw Error("TransformerEncoderLayer: expected d_model and dim_feedforward > 0, got " +
                std::to_string(o.d_model()) + " and " + std::to_string(o.dim_feedforward()));
  self_attn = register_module(
      "self_attn",
      MultiheadAttention(MultiheadAttentionOptions(o.d_model(), o.nhead()).dropout(o.dropout())));
  linear1 = register_module("linear1", ModuleHolder<LinearImpl>(o.d_model(), o.dim_feedforward()));
  dropout = register_module("dropout", ModuleHolder<DropoutImpl>(o.dropout()));
  linear2 = register_module("linear2", ModuleHolder<LinearImpl>(o.dim_feedforward(), o.d_model()));
  norm1 = register_module("norm1", ModuleHolder<LayerNormImpl>(Shape{o.d_model()}));
  norm2 = register_module("norm2", ModuleHolder<LayerNormImpl>(Shape{o.d_model()}));
  dropout1 = register_module("dropout1", ModuleHolder<DropoutImpl>(o.dropout()));
  dropout2 = register_module("dropout2", ModuleHolder<DropoutImpl>(o.dropout()));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& src_mask,
                                            const Tensor& src_key_padding_mask, Loc l) {
  Tensor attended = std::get<0>(
      self_attn->forward(src, src, src, src_key_padding_mask, false, src_mask, true, l));
  Tensor x = norm1->forward(src.add(dropout1->forward(attended, l), 1, l), l);
  Tensor ff =
      linear2->forward(dropout->forward(options.activation()(linear1->forward(x, l), l), l), l);
  return norm2->forward(x.add(dropout2->forward(ff, l), 1, l), l);
}

AnyModule AnyModule::clone(const std::optional<Device>& device) const {
  AnyModule copy;
  if (module_) copy.module_ = module_->clone(device);
  copy.forward_ = forward_;
  return copy;
}

TransformerEncoderImpl::TransformerEncoderImpl(TransformerEncoderOptions o)
    : Module("TransformerEncoder"), options(std::move(o)) {
  std::tie(layers, norm) =
      detail::register_layer_stack(*this, "TransformerEncoder", options.encoder_layer().ptr(),
                                   options.num_layers(), options.norm());
}

Tensor TransformerEncoderImpl::forward(const Tensor& src, const Tensor& src_mask,
                                       const Tensor& src_key_padding_mask, Loc l) {
  Tensor out = src;
  for (size_t i = 0; i < layers->size(); ++i)
    out =
        layers->at<TransformerEncoderLayerImpl>(i).forward(out, src_mask, src_key_padding_mask, l);
  return norm.is_empty() ? out : norm.forward(TensorAt(out, l));
}

}  // namespace kiln::nn

namespace kiln {

std::pair<nn::ModuleHolder<nn::ModuleListImpl>, nn::AnyModule> detail::register_layer_stack(
    nn::Module& owner, const char* what, const std::shared_ptr<nn::Module>& layer,
    int64_t num_layers, const nn::AnyModule& norm) {
  if (!layer) throw Error(std::string(what) + ": expected a layer, got an empty holder");
  if (num_layers < 0)
    throw Error(std::string(what) + ": expected num_layers >= 0, got " +
                std::to_string(num_layers));
  auto layers = owner.register_module("layers", nn::ModuleHolder<nn::ModuleListImpl>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(layer->clone());
  nn::AnyModule copy;
  if (!norm.is_empty()) {
    copy = norm.clone();
    owner.register_module_ptr("norm", copy.ptr());
  }
  // Moved: from an lvalue, ModuleHolder's forwarding constructor would make a new list holding it.
  return {std::move(layers), std::move(copy)};
}

}  // namespace kiln
