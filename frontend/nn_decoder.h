// TransformerDecoderLayer, TransformerDecoder and Transformer as libtorch's
// (1.13): the same options, children in libtorch's registration order (so
// named_parameters() lists the same names in the same order as libtorch's and
// PyTorch's), sequence-first shapes ([T, N, E] targets, [S, N, E] memory) and
// masks. Built from MultiheadAttention, Linear, LayerNorm and Dropout
// (frontend/nn_transformer.h), so they run eagerly, trace and differentiate
// like the rest.
#pragma once

#include "frontend/nn_transformer.h"

namespace kiln::nn {

/// The decoder layer's options: libtorch has a second struct with the encoder
/// layer's fields (d_model, nhead, dim_feedforward, dropout, activation) and
/// defaults; one struct serves both here.
using TransformerDecoderLayerOptions = TransformerEncoderLayerOptions;

/// libtorch 1.13's post-norm decoder layer on tgt [T, N, d_model] and memory
/// [S, N, d_model]:
///   x = norm1(tgt + dropout1(self_attn(tgt, tgt, tgt, tgt_key_padding_mask, tgt_mask)))
///   x = norm2(x + dropout2(multihead_attn(x, memory, memory, memory_key_padding_mask,
///   memory_mask))) out = norm3(x + dropout3(linear2(dropout(activation(linear1(x))))))
/// Children in libtorch 1.13's order (PyTorch's too): self_attn,
/// multihead_attn, linear1, dropout, linear2, norm1, norm2, norm3, dropout1,
/// dropout2, dropout3.
class TransformerDecoderLayerImpl : public Module {
 public:
  TransformerDecoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerDecoderLayerImpl(TransformerDecoderLayerOptions(d_model, nhead)) {}
  explicit TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {}, KILN_LOC);
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<TransformerDecoderLayerImpl>(options), device);
  }

  TransformerDecoderLayerOptions options;
  MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};
  ModuleHolder<LinearImpl> linear1{nullptr};
  ModuleHolder<DropoutImpl> dropout{nullptr};
  ModuleHolder<LinearImpl> linear2{nullptr};
  ModuleHolder<LayerNormImpl> norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  ModuleHolder<DropoutImpl> dropout1{nullptr}, dropout2{nullptr}, dropout3{nullptr};
};
using TransformerDecoderLayer = ModuleHolder<TransformerDecoderLayerImpl>;

struct TransformerDecoderOptions {
  /// Layers that start as copies (clone()) of `decoder_layer`.
  TransformerDecoderOptions(TransformerDecoderLayer decoder_layer, int64_t num_layers)
      : decoder_layer_(std::move(decoder_layer)), num_layers_(num_layers) {}
  /// Layers that start as copies of a new layer made with these options.
  TransformerDecoderOptions(const TransformerDecoderLayerOptions& layer_options, int64_t num_layers)
      : decoder_layer_(layer_options), num_layers_(num_layers) {}
  KILN_ARG(TransformerDecoderLayer, decoder_layer);
  KILN_ARG(int64_t, num_layers);
  /// Applied to the last layer's output when given (a LayerNorm, say).
  KILN_ARG(AnyModule, norm);
};

/// libtorch 1.13's stack of decoder layers: num_layers copies of one layer as
/// the ModuleList `layers` ("layers.0.self_attn.in_proj_weight", ...), each
/// applied in turn to the running target with the same memory and masks, then
/// `norm` ("norm.weight") when given.
class TransformerDecoderImpl : public Module {
 public:
  TransformerDecoderImpl(TransformerDecoderLayer decoder_layer, int64_t num_layers)
      : TransformerDecoderImpl(TransformerDecoderOptions(std::move(decoder_layer), num_layers)) {}
  explicit TransformerDecoderImpl(TransformerDecoderOptions options);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {}, KILN_LOC);
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<TransformerDecoderImpl>(options), device);
  }

  TransformerDecoderOptions options;
  ModuleHolder<ModuleListImpl> layers{nullptr};
  AnyModule norm;
};
using TransformerDecoder = ModuleHolder<TransformerDecoderImpl>;

struct TransformerOptions {
  TransformerOptions() = default;
  TransformerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  TransformerOptions(int64_t d_model, int64_t nhead, int64_t num_encoder_layers,
                     int64_t num_decoder_layers)
      : d_model_(d_model),
        nhead_(nhead),
        num_encoder_layers_(num_encoder_layers),
        num_decoder_layers_(num_decoder_layers) {}
  KILN_ARG(int64_t, d_model) = 512;
  KILN_ARG(int64_t, nhead) = 8;
  KILN_ARG(int64_t, num_encoder_layers) = 6;
  KILN_ARG(int64_t, num_decoder_layers) = 6;
  KILN_ARG(int64_t, dim_feedforward) = 2048;
  KILN_ARG(double, dropout) = 0.1;
  KILN_ARG(TransformerActivation, activation) = TransformerActivation::ReLU;
  /// Used instead of the TransformerEncoder when given (a copy of it): its
  /// forward takes (src, src_mask, src_key_padding_mask).
  KILN_ARG(AnyModule, custom_encoder);
  /// Used instead of the TransformerDecoder when given: its forward takes (tgt,
  /// memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask).
  KILN_ARG(AnyModule, custom_decoder);
};

/// libtorch 1.13's Transformer: `encoder` (a TransformerEncoder of
/// num_encoder_layers layers with a final LayerNorm) and `decoder` (likewise),
/// both AnyModules; every parameter of two or more dims is then re-drawn
/// xavier-uniform, as libtorch's reset_parameters. forward(src [S, N, E], tgt
/// [T, N, E], masks...) = decoder(tgt, encoder(src, src_mask,
/// src_key_padding_mask), tgt_mask, memory_mask, tgt_key_padding_mask,
/// memory_key_padding_mask): [T, N, E].
class TransformerImpl : public Module {
 public:
  explicit TransformerImpl(TransformerOptions options = {});
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = {},
                 const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& src_key_padding_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {}, KILN_LOC);
  /// [sz, sz] float: 0 on and below the diagonal, -inf above (position i may
  /// attend to positions <= i), as libtorch's.
  static Tensor generate_square_subsequent_mask(int64_t sz, KILN_LOC);
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<TransformerImpl>(options), device);
  }

  TransformerOptions options;
  AnyModule encoder;
  AnyModule decoder;
};
using Transformer = ModuleHolder<TransformerImpl>;

}  // namespace kiln::nn
