// TransformerDecoderLayer, TransformerDecoder and Transformer
// (frontend/nn_decoder.h): libtorch 1.13's forward passes, step by step, over
// the modules of frontend/nn_transformer.h.
#include "frontend/nn_decoder.h"

#include <limits>

#include "frontend/dispatch.h"
#include "frontend/nn_parity.h"

namespace kiln::nn {

using detail::here;

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& o)
    : Module("TransformerDecoderLayer"), options(o) {
  if (o.d_model() <= 0 || o.dim_feedforward() <= 0)
    throw Error("TransformerDecoderLayer: expected d_model and dim_feedforward > 0, got " +
                std::to_string(o.d_model()) + " and " + std::to_string(o.dim_feedforward()));
  const auto attention = [&] {
    return MultiheadAttention(
        MultiheadAttentionOptions(o.d_model(), o.nhead()).dropout(o.dropout()));
  };
  const auto norm = [&] { return ModuleHolder<LayerNormImpl>(Shape{o.d_model()}); };
  const auto drop = [&] { return ModuleHolder<DropoutImpl>(o.dropout()); };
  self_attn = register_module("self_attn", attention());
  multihead_attn = register_module("multihead_attn", attention());
  linear1 = register_module("linear1", ModuleHolder<LinearImpl>(o.d_model(), o.dim_feedforward()));
  dropout = register_module("dropout", drop());
  linear2 = register_module("linear2", ModuleHolder<LinearImpl>(o.dim_feedforward(), o.d_model()));
  norm1 = register_module("norm1", norm());
  norm2 = register_module("norm2", norm());
  norm3 = register_module("norm3", norm());
  dropout1 = register_module("dropout1", drop());
  dropout2 = register_module("dropout2", drop());
  dropout3 = register_module("dropout3", drop());
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor& tgt, const Tensor& memory,
                                            const Tensor& tgt_mask, const Tensor& memory_mask,
                                            const Tensor& tgt_key_padding_mask,
                                            const Tensor& memory_key_padding_mask, Loc l) {
  if (memory.dim() != 3 || tgt.dim() != 3 || memory.size(1) != tgt.size(1))
    throw Error("TransformerDecoderLayer: expected tgt [T, N, E] and memory [S, N, E], got " +
                    shape_str(tgt.sizes()) + " and " + shape_str(memory.sizes()),
                here(l));
  Tensor attended = std::get<0>(
      self_attn->forward(tgt, tgt, tgt, tgt_key_padding_mask, false, tgt_mask, true, l));
  Tensor x = norm1->forward(tgt.add(dropout1->forward(attended, l), 1, l), l);
  Tensor recalled = std::get<0>(multihead_attn->forward(x, memory, memory, memory_key_padding_mask,
                                                        false, memory_mask, true, l));
  x = norm2->forward(x.add(dropout2->forward(recalled, l), 1, l), l);
  Tensor ff =
      linear2->forward(dropout->forward(options.activation()(linear1->forward(x, l), l), l), l);
  return norm3->forward(x.add(dropout3->forward(ff, l), 1, l), l);
}

TransformerDecoderImpl::TransformerDecoderImpl(TransformerDecoderOptions o)
    : Module("TransformerDecoder"), options(std::move(o)) {
  std::tie(layers, norm) =
      detail::register_layer_stack(*this, "TransformerDecoder", options.decoder_layer().ptr(),
                                   options.num_layers(), options.norm());
}

Tensor TransformerDecoderImpl::forward(const Tensor& tgt, const Tensor& memory,
                                       const Tensor& tgt_mask, const Tensor& memory_mask,
                                       const Tensor& tgt_key_padding_mask,
                                       const Tensor& memory_key_padding_mask, Loc l) {
  Tensor out = tgt;
  for (size_t i = 0; i < layers->size(); ++i)
    out = layers->at<TransformerDecoderLayerImpl>(i).forward(
        out, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, l);
  return norm.is_empty() ? out : norm.forward(TensorAt(out, l));
}

TransformerImpl::TransformerImpl(TransformerOptions o)
    : Module("Transformer"), options(std::move(o)) {
  const auto layer_norm = [&] { return AnyModule(LayerNorm(Shape{options.d_model()})); };
  if (options.custom_encoder().is_empty()) {
    encoder = AnyModule(TransformerEncoder(
        TransformerEncoderOptions(TransformerEncoderLayerOptions(options.d_model(), options.nhead())
                                      .dim_feedforward(options.dim_feedforward())
                                      .dropout(options.dropout())
                                      .activation(options.activation()),
                                  options.num_encoder_layers())
            .norm(layer_norm())));
  } else {
    encoder = options.custom_encoder().clone();
  }
  register_module_ptr("encoder", encoder.ptr());
  if (options.custom_decoder().is_empty()) {
    decoder = AnyModule(TransformerDecoder(
        TransformerDecoderOptions(TransformerDecoderLayerOptions(options.d_model(), options.nhead())
                                      .dim_feedforward(options.dim_feedforward())
                                      .dropout(options.dropout())
                                      .activation(options.activation()),
                                  options.num_decoder_layers())
            .norm(layer_norm())));
  } else {
    decoder = options.custom_decoder().clone();
  }
  register_module_ptr("decoder", decoder.ptr());
  for (Tensor& p : parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor TransformerImpl::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask,
                                const Tensor& tgt_mask, const Tensor& memory_mask,
                                const Tensor& src_key_padding_mask,
                                const Tensor& tgt_key_padding_mask,
                                const Tensor& memory_key_padding_mask, Loc l) {
  const int64_t e = options.d_model();
  if (src.dim() != 3 || tgt.dim() != 3 || src.size(1) != tgt.size(1) || src.size(2) != e ||
      tgt.size(2) != e)
    throw Error("Transformer: expected src [S, N, " + std::to_string(e) + "] and tgt [T, N, " +
                    std::to_string(e) + "] (the same batch N), got " + shape_str(src.sizes()) +
                    " and " + shape_str(tgt.sizes()),
                here(l));
  Tensor memory = encoder.forward(TensorAt(src, l), src_mask, src_key_padding_mask);
  return decoder.forward(TensorAt(tgt, l), memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                         memory_key_padding_mask);
}

Tensor TransformerImpl::generate_square_subsequent_mask(int64_t sz, Loc l) {
  if (sz < 0)
    throw Error("Transformer::generate_square_subsequent_mask: expected a size >= 0, got " +
                    std::to_string(sz),
                here(l));
  return zeros({sz, sz}, {}, l)
      .masked_fill(ones({sz, sz}, {}, l).triu(1, l).to(kBool, l),
                   Scalar(-std::numeric_limits<double>::infinity()), l);
}

}  // namespace kiln::nn
