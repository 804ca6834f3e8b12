// MultiheadAttention and TransformerEncoderLayer as libtorch's (1.13): the same
// options, parameter names, initialisation rules, sequence-first shapes
// ([L, N, E]) and masks, computed as libtorch's multi_head_attention_forward
// does (projections, scaled q k^T, the masks, softmax, dropout, the weighted
// values, the output projection), from table ops (frontend/nn_transformer.cpp).
#pragma once

#include <functional>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/nn.h"
#include "frontend/nn_parity.h"

namespace kiln::nn {

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads), kdim_(embed_dim), vdim_(embed_dim) {}
  KILN_ARG(int64_t, embed_dim);
  KILN_ARG(int64_t, num_heads);
  /// Dropout on the attention weights (when training).
  KILN_ARG(double, dropout) = 0.0;
  /// Biases of the input and output projections.
  KILN_ARG(bool, bias) = true;
  /// Learned key and value rows appended to every sequence (bias_k, bias_v).
  KILN_ARG(bool, add_bias_kv) = false;
  /// A row of zeros appended to every key and value sequence after projection.
  KILN_ARG(bool, add_zero_attn) = false;
  /// Features of the key and the value inputs (embed_dim by default); when
  /// either differs, q, k and v have their own projection weights.
  KILN_ARG(int64_t, kdim);
  KILN_ARG(int64_t, vdim);
};

/// Attention over num_heads heads of embed_dim / num_heads features.
/// forward(query [L, N, E], key [S, N, kdim], value [S, N, vdim],
/// key_padding_mask [N, S] bool (true: the key is ignored), need_weights,
/// attn_mask [L, S] or [N * heads, L, S] float (added to the scores: 0 keeps,
/// -inf blocks), average_attn_weights) returns the output [L, N, E] and, when
/// need_weights, the attention weights [N, L, S] (averaged over heads) or
/// [N, heads, L, S]; else an undefined tensor. Parameters: in_proj_weight
/// [3E, E] (xavier uniform; or q_proj_weight, k_proj_weight, v_proj_weight when
/// kdim or vdim differ from E), in_proj_bias [3E] (zeros), out_proj (a Linear
/// whose bias starts at zero), bias_k and bias_v [1, 1, E] (xavier normal).
class MultiheadAttentionImpl : public Module {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true,
                                     KILN_LOC);
  std::string repr() const override;
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<MultiheadAttentionImpl>(options), device);
  }

  MultiheadAttentionOptions options;
  bool _qkv_same_embed_dim;
  int64_t head_dim;
  Tensor in_proj_weight, in_proj_bias, bias_k, bias_v;
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;
  ModuleHolder<LinearImpl> out_proj{nullptr};
};
using MultiheadAttention = ModuleHolder<MultiheadAttentionImpl>;

/// The feed-forward activation of a transformer layer: ReLU, GELU or any
/// function of a tensor (libtorch's activation_t).
class TransformerActivation {
 public:
  enum Kind { ReLU, GELU };
  TransformerActivation(Kind kind = ReLU)
      : kind_(kind) {}  // NOLINT: implicit, as libtorch's variant
  template <class F>
  requires(!std::is_same_v<F, TransformerActivation> &&
           std::is_invocable_r_v<Tensor, const F&, const Tensor&>)
      TransformerActivation(F f)  // NOLINT
      : fn_([f = std::move(f)](const Tensor& x) { return Tensor(f(x)); }) {}
  Tensor operator()(const Tensor& x, KILN_LOC) const;

 private:
  Kind kind_ = ReLU;
  std::function<Tensor(const Tensor&)> fn_;
};

struct TransformerEncoderLayerOptions {
  TransformerEncoderLayerOptions(int64_t d_model, int64_t nhead)  // NOLINT: implicit, as libtorch
      : d_model_(d_model), nhead_(nhead) {}
  KILN_ARG(int64_t, d_model);
  KILN_ARG(int64_t, nhead);
  KILN_ARG(int64_t, dim_feedforward) = 2048;
  KILN_ARG(double, dropout) = 0.1;
  KILN_ARG(TransformerActivation, activation) = TransformerActivation::ReLU;
};

/// libtorch 1.13's post-norm encoder layer:
///   x = norm1(src + dropout1(self_attn(src, src, src, src_key_padding_mask, src_mask)))
///   out = norm2(x + dropout2(linear2(dropout(activation(linear1(x))))))
/// on [L, N, d_model]; children self_attn, linear1, dropout, linear2, norm1,
/// norm2, dropout1, dropout2.
class TransformerEncoderLayerImpl : public Module {
 public:
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead)) {}
  explicit TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options);
  Tensor forward(const Tensor& src, const Tensor& src_mask = {},
                 const Tensor& src_key_padding_mask = {}, KILN_LOC);
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<TransformerEncoderLayerImpl>(options), device);
  }

  TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn{nullptr};
  ModuleHolder<LinearImpl> linear1{nullptr};
  ModuleHolder<DropoutImpl> dropout{nullptr};
  ModuleHolder<LinearImpl> linear2{nullptr};
  ModuleHolder<LayerNormImpl> norm1{nullptr}, norm2{nullptr};
  ModuleHolder<DropoutImpl> dropout1{nullptr}, dropout2{nullptr};
};
using TransformerEncoderLayer = ModuleHolder<TransformerEncoderLayerImpl>;

/// A module of any type whose forward takes one or more tensors and returns a
/// tensor (libtorch's AnyModule, for those signatures; made from a holder:
/// `AnyModule(LayerNorm(...))`). forward(x, ...) passes its tensors on; a
/// module whose forward does not take that many tensors is an error naming it.
class AnyModule {
 public:
  /// The most tensors forward() passes on.
  static constexpr size_t kMaxArguments = 8;
  AnyModule() = default;
  template <class Impl>
  requires std::is_base_of_v<Module, Impl> AnyModule(
      const ModuleHolder<Impl>& m)  // NOLINT: implicit, as libtorch's
      : AnyModule(m.ptr()) {}
  template <class Impl>
  requires std::is_base_of_v<Module, Impl>
  explicit AnyModule(std::shared_ptr<Impl> m)
      : module_(std::move(m)), forward_(&forward_of<Impl>) {}
  /// The module's forward (libtorch's forward<Tensor>(...)); the first tensor
  /// carries the caller's source line.
  template <class Return = Tensor, class... Rest>
  requires(std::is_convertible_v<const Rest&, const Tensor&>&&...) Return
      forward(TensorAt first, const Rest&... rest)
  const {
    static_assert(std::is_same_v<Return, Tensor>, "AnyModule::forward returns a Tensor");
    static_assert(sizeof...(Rest) < kMaxArguments, "AnyModule::forward: too many tensors");
    if (!module_) throw Error("AnyModule: forward of an empty AnyModule");
    return forward_(*module_, {first.t, Tensor(rest)...}, first.loc);
  }
  bool is_empty() const { return module_ == nullptr; }
  const std::shared_ptr<Module>& ptr() const { return module_; }
  /// A deep copy of the module (Module::clone).
  AnyModule clone(const std::optional<Device>& device = std::nullopt) const;

 private:
  using Forward = Tensor (*)(Module&, const std::vector<Tensor>&, Loc);
  // Impl's forward with args.size() tensors (and the source line when it takes one).
  template <class Impl>
  static Tensor forward_of(Module& mod, const std::vector<Tensor>& args, Loc loc) {
    return forward_with<Impl>(static_cast<Impl&>(mod), args, loc,
                              std::make_index_sequence<kMaxArguments + 1>());
  }
  template <class Impl, size_t... N>
  static Tensor forward_with(Impl& impl, const std::vector<Tensor>& args, Loc loc,
                             std::index_sequence<N...>) {
    Tensor out;
    const bool called =
        ((args.size() == N &&
          (out = forward_n<Impl>(impl, args, loc, std::make_index_sequence<N>()), true)) ||
         ...);
    if (!called) throw Error("AnyModule: too many tensors for forward");
    return out;
  }
  template <class Impl, size_t... I>
  static Tensor forward_n(Impl& impl, const std::vector<Tensor>& a, Loc loc,
                          std::index_sequence<I...>) {
    if constexpr (requires { Tensor(impl.forward(a[I]..., loc)); })
      return impl.forward(a[I]..., loc);
    else if constexpr (requires { Tensor(impl.forward(a[I]...)); })
      return impl.forward(a[I]...);
    else
      throw Error("AnyModule: the " + impl.name() + " module has no forward of " +
                  std::to_string(sizeof...(I)) + " tensors returning a tensor");
  }

  std::shared_ptr<Module> module_;
  Forward forward_ = nullptr;
};

}  // namespace kiln::nn

namespace kiln::detail {
/// The encoder's and decoder's shared construction: registers `num_layers`
/// clones of `layer` as `owner`'s ModuleList "layers" and, when `norm` is not
/// empty, a clone of it as "norm" (returned, else an empty AnyModule). `what`
/// names errors.
std::pair<nn::ModuleHolder<nn::ModuleListImpl>, nn::AnyModule> register_layer_stack(
    nn::Module& owner, const char* what, const std::shared_ptr<nn::Module>& layer,
    int64_t num_layers, const nn::AnyModule& norm);
}  // namespace kiln::detail

namespace kiln::nn {

struct TransformerEncoderOptions {
  /// Layers that start as copies (clone()) of `encoder_layer`.
  TransformerEncoderOptions(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : encoder_layer_(std::move(encoder_layer)), num_layers_(num_layers) {}
  /// Layers that start as copies of a new layer made with these options.
  TransformerEncoderOptions(const TransformerEncoderLayerOptions& layer_options, int64_t num_layers)
      : encoder_layer_(layer_options), num_layers_(num_layers) {}
  KILN_ARG(TransformerEncoderLayer, encoder_layer);
  KILN_ARG(int64_t, num_layers);
  /// Applied to the last layer's output when given (a LayerNorm, say).
  KILN_ARG(AnyModule, norm);
};

/// libtorch 1.13's stack of encoder layers: num_layers copies of one layer (the
/// same starting weights, as libtorch's clone and PyTorch's deepcopy give), as
/// the ModuleList `layers` ("layers.0.self_attn.in_proj_weight", ...), each
/// applied in turn with the same masks, then `norm` ("norm.weight") when given.
class TransformerEncoderImpl : public Module {
 public:
  TransformerEncoderImpl(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : TransformerEncoderImpl(TransformerEncoderOptions(std::move(encoder_layer), num_layers)) {}
  explicit TransformerEncoderImpl(TransformerEncoderOptions options);
  Tensor forward(const Tensor& src, const Tensor& src_mask = {},
                 const Tensor& src_key_padding_mask = {}, KILN_LOC);
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<TransformerEncoderImpl>(options), device);
  }

  TransformerEncoderOptions options;
  ModuleHolder<ModuleListImpl> layers{nullptr};
  AnyModule norm;
};
using TransformerEncoder = ModuleHolder<TransformerEncoderImpl>;

}  // namespace kiln::nn
