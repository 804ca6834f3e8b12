// EmbeddingBag and Bilinear as libtorch's (1.13), with their functions
// embedding_bag and bilinear: the same options, parameter names and
// initialisation. Each is a composite of table ops (frontend/nn_bag.cpp says
// how), so it runs eagerly, traces and differentiates like the rest.
#pragma once

#include <optional>
#include <string>

#include "frontend/nn.h"

namespace kiln::nn {

/// How embedding_bag reduces the rows of a bag.
enum class EmbeddingBagMode { Sum, Mean, Max };
const char* embedding_bag_mode_name(EmbeddingBagMode mode);

namespace functional {
/// embedding_bag's options (libtorch's EmbeddingBagFuncOptions). max_norm,
/// scale_grad_by_freq and sparse are refused, as by Embedding.
struct EmbeddingBagFuncOptions {
  KILN_ARG(Tensor, offsets);
  KILN_ARG(std::optional<double>, max_norm);
  KILN_ARG(double, norm_type) = 2.0;
  KILN_ARG(bool, scale_grad_by_freq) = false;
  KILN_ARG(EmbeddingBagMode, mode) = EmbeddingBagMode::Mean;
  KILN_ARG(bool, sparse) = false;
  KILN_ARG(Tensor, per_sample_weights);
  KILN_ARG(bool, include_last_offset) = false;
  KILN_ARG(std::optional<int64_t>, padding_idx);
};

/// The rows of `weight` [V, D] at `input`'s indices, reduced per bag (sum,
/// mean or max) without holding the [bags, length, D] rows: input [B, N] is B
/// bags of N; input [n] with offsets [B] (each bag's first position, the first
/// 0) is B bags of consecutive indices, offsets [B + 1] with
/// include_last_offset (the last is where the last bag ends). Indices equal to
/// padding_idx take no part (a mean counts the others; an empty bag is zeros,
/// in every mode); per_sample_weights (input's shape, mode Sum only) weigh
/// each row. Returns [B, D]. Gradients reach weight and per_sample_weights;
/// in mode Max, rows tied for a bag's maximum share its gradient.
Tensor embedding_bag(const Tensor& input, const Tensor& weight,
                     const EmbeddingBagFuncOptions& options = {}, KILN_LOC);

/// y = x1^T W x2 + b per output feature: input1 [..., in1], input2 [..., in2]
/// (the same leading dims), weight [out, in1, in2], bias [out] -> [..., out].
Tensor bilinear(const Tensor& input1, const Tensor& input2, const Tensor& weight,
                const Tensor& bias = {}, KILN_LOC);
}  // namespace functional

struct EmbeddingBagOptions {
  EmbeddingBagOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  KILN_ARG(int64_t, num_embeddings);
  KILN_ARG(int64_t, embedding_dim);
  KILN_ARG(std::optional<double>, max_norm);
  KILN_ARG(double, norm_type) = 2.0;
  KILN_ARG(bool, scale_grad_by_freq) = false;
  KILN_ARG(EmbeddingBagMode, mode) = EmbeddingBagMode::Mean;
  KILN_ARG(bool, sparse) = false;
  KILN_ARG(Tensor, _weight);
  KILN_ARG(bool, include_last_offset) = false;
  KILN_ARG(std::optional<int64_t>, padding_idx);
};

struct EmbeddingBagFromPretrainedOptions {
  /// The table gets no gradient (weight.requires_grad false).
  KILN_ARG(bool, freeze) = true;
  KILN_ARG(std::optional<double>, max_norm);
  KILN_ARG(double, norm_type) = 2.0;
  KILN_ARG(bool, scale_grad_by_freq) = false;
  KILN_ARG(EmbeddingBagMode, mode) = EmbeddingBagMode::Mean;
  KILN_ARG(bool, sparse) = false;
  KILN_ARG(bool, include_last_offset) = false;
  KILN_ARG(std::optional<int64_t>, padding_idx);
};

/// A table `weight` [num_embeddings, embedding_dim], initialised N(0, 1) with
/// the padding row zero (or given as _weight); forward(input, offsets,
/// per_sample_weights) is embedding_bag with the options' mode,
/// include_last_offset and padding_idx.
class EmbeddingBagImpl : public Module {
 public:
  EmbeddingBagImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingBagImpl(EmbeddingBagOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingBagImpl(const EmbeddingBagOptions& options);
  Tensor forward(const Tensor& input, const Tensor& offsets = {},
                 const Tensor& per_sample_weights = {}, KILN_LOC);
  std::string repr() const override;
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<EmbeddingBagImpl>(options), device);
  }

  EmbeddingBagOptions options;
  Tensor weight;
};

/// EmbeddingBag's holder, with libtorch's from_pretrained.
class EmbeddingBag : public ModuleHolder<EmbeddingBagImpl> {
 public:
  using ModuleHolder<EmbeddingBagImpl>::ModuleHolder;
  /// A bag over `embeddings` [V, D] itself (not a copy), frozen unless told.
  static EmbeddingBag from_pretrained(const Tensor& embeddings,
                                      const EmbeddingBagFromPretrainedOptions& options = {});
};

struct BilinearOptions {
  BilinearOptions(int64_t in1_features, int64_t in2_features, int64_t out_features)
      : in1_features_(in1_features), in2_features_(in2_features), out_features_(out_features) {}
  KILN_ARG(int64_t, in1_features);
  KILN_ARG(int64_t, in2_features);
  KILN_ARG(int64_t, out_features);
  KILN_ARG(bool, bias) = true;
};

/// bilinear with weight [out, in1, in2] and bias [out], both uniform in
/// +-1/sqrt(in1_features), as libtorch's.
class BilinearImpl : public Module {
 public:
  BilinearImpl(int64_t in1_features, int64_t in2_features, int64_t out_features)
      : BilinearImpl(BilinearOptions(in1_features, in2_features, out_features)) {}
  explicit BilinearImpl(const BilinearOptions& options);
  Tensor forward(const Tensor& input1, const Tensor& input2, KILN_LOC) {
    return functional::bilinear(input1, input2, weight, bias, loc);
  }
  std::string repr() const override;
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    return copied_into(std::make_shared<BilinearImpl>(options), device);
  }

  BilinearOptions options;
  Tensor weight, bias;
};
using Bilinear = ModuleHolder<BilinearImpl>;

}  // namespace kiln::nn

namespace kiln::detail {
/// Embedding's and EmbeddingBag's table: refuses max_norm, scale_grad_by_freq
/// and sparse (`unsupported`), checks padding_idx (negative counts from the
/// end) and _weight's shape, and registers "weight" on `owner`: `given`, or
/// N(0, 1) with the padding row zero. Returns the padding row, or -1.
int64_t register_embedding_table(nn::Module& owner, const std::string& what, int64_t n, int64_t dim,
                                 std::optional<int64_t> padding_idx, const Tensor& given,
                                 bool unsupported, Tensor& weight);
}  // namespace kiln::detail
