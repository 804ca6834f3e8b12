// torch::nn on Kiln: Kiln's modules under libtorch's names, TORCH_MODULE,
// and torch::nn::functional's options structs (each call forwards to Kiln's
// function; nothing is implemented twice).
#pragma once

#include "torch/functions.h"

namespace torch::nn {

using kiln::nn::AdaptiveAvgPool1d;
using kiln::nn::AdaptiveAvgPool1dImpl;
using kiln::nn::AdaptiveAvgPool1dOptions;
using kiln::nn::AdaptiveAvgPool2d;
using kiln::nn::AdaptiveAvgPool2dImpl;
/// forward's loss is a 0-dim tensor (libtorch since 1.5 reads it back as a
/// double, without a gradient): out.loss.item<double>() where libtorch has out.loss.
using kiln::nn::AdaptiveLogSoftmaxWithLoss;
using kiln::nn::AdaptiveLogSoftmaxWithLossImpl;
using kiln::nn::AdaptiveLogSoftmaxWithLossOptions;
using kiln::nn::AdaptiveMaxPool1d;
using kiln::nn::AdaptiveMaxPool1dImpl;
using kiln::nn::AdaptiveMaxPool1dOptions;
using kiln::nn::AdaptiveMaxPool2d;
using kiln::nn::AdaptiveMaxPool2dImpl;
using kiln::nn::AdaptiveMaxPool2dOptions;
using kiln::nn::AnyModule;
using kiln::nn::ASMoutput;
using kiln::nn::AvgPool1d;
using kiln::nn::AvgPool1dImpl;
using kiln::nn::AvgPool1dOptions;
using kiln::nn::AvgPool2d;
using kiln::nn::AvgPool2dImpl;
using kiln::nn::AvgPool2dOptions;
using kiln::nn::BatchNorm1d;
using kiln::nn::BatchNorm1dImpl;
using kiln::nn::BatchNorm1dOptions;
using kiln::nn::BatchNorm2d;
using kiln::nn::BatchNorm2dImpl;
using kiln::nn::BatchNorm2dOptions;
using kiln::nn::BatchNormOptions;
using kiln::nn::BCELoss;
using kiln::nn::BCELossImpl;
using kiln::nn::BCELossOptions;
using kiln::nn::BCEWithLogitsLoss;
using kiln::nn::BCEWithLogitsLossImpl;
using kiln::nn::BCEWithLogitsLossOptions;
using kiln::nn::Bilinear;
using kiln::nn::BilinearImpl;
using kiln::nn::BilinearOptions;
using kiln::nn::CELU;
using kiln::nn::CELUImpl;
using kiln::nn::CELUOptions;
using kiln::nn::ConstantPad1d;
using kiln::nn::ConstantPad1dImpl;
using kiln::nn::ConstantPad1dOptions;
using kiln::nn::ConstantPad2d;
using kiln::nn::ConstantPad2dImpl;
using kiln::nn::ConstantPad2dOptions;
using kiln::nn::ConstantPad3d;
using kiln::nn::ConstantPad3dImpl;
using kiln::nn::ConstantPad3dOptions;
using kiln::nn::Conv1d;
using kiln::nn::Conv1dImpl;
using kiln::nn::Conv1dOptions;
using kiln::nn::Conv2d;
using kiln::nn::Conv2dImpl;
using kiln::nn::Conv2dOptions;
using kiln::nn::ConvTranspose2d;
using kiln::nn::ConvTranspose2dImpl;
using kiln::nn::ConvTranspose2dOptions;
using kiln::nn::CosineEmbeddingLoss;
using kiln::nn::CosineEmbeddingLossImpl;
using kiln::nn::CosineEmbeddingLossOptions;
using kiln::nn::CosineSimilarity;
using kiln::nn::CosineSimilarityImpl;
using kiln::nn::CosineSimilarityOptions;
using kiln::nn::CrossEntropyLoss;
using kiln::nn::CrossEntropyLossImpl;
using kiln::nn::Dropout;
using kiln::nn::Dropout2d;
using kiln::nn::Dropout2dImpl;
using kiln::nn::DropoutImpl;
using kiln::nn::DropoutOptions;
using kiln::nn::ELU;
using kiln::nn::ELUImpl;
using kiln::nn::ELUOptions;
using kiln::nn::Embedding;
using kiln::nn::EmbeddingFromPretrainedOptions;
using kiln::nn::EmbeddingImpl;
using kiln::nn::EmbeddingOptions;
using kiln::nn::EmbeddingBag;
using kiln::nn::EmbeddingBagFromPretrainedOptions;
using kiln::nn::EmbeddingBagImpl;
using kiln::nn::EmbeddingBagMode;
using kiln::nn::EmbeddingBagOptions;
using kiln::nn::Flatten;
using kiln::nn::FlattenImpl;
using kiln::nn::FlattenOptions;
using kiln::nn::Functional;
using kiln::nn::FunctionalImpl;
using kiln::nn::GELU;
using kiln::nn::GELUImpl;
using kiln::nn::GLU;
using kiln::nn::GLUImpl;
using kiln::nn::GLUOptions;
using kiln::nn::GroupNorm;
using kiln::nn::GroupNormImpl;
using kiln::nn::GroupNormOptions;
using kiln::nn::GRU;
using kiln::nn::GRUCell;
using kiln::nn::GRUCellImpl;
using kiln::nn::GRUCellOptions;
using kiln::nn::GRUImpl;
using kiln::nn::GRUOptions;
using kiln::nn::Hardshrink;
using kiln::nn::Hardsigmoid;
using kiln::nn::HardsigmoidImpl;
using kiln::nn::Hardswish;
using kiln::nn::HardswishImpl;
using kiln::nn::HardshrinkImpl;
using kiln::nn::HardshrinkOptions;
using kiln::nn::Hardtanh;
using kiln::nn::HardtanhImpl;
using kiln::nn::HardtanhOptions;
using kiln::nn::HingeEmbeddingLoss;
using kiln::nn::HingeEmbeddingLossImpl;
using kiln::nn::HingeEmbeddingLossOptions;
using kiln::nn::HuberLoss;
using kiln::nn::HuberLossImpl;
using kiln::nn::HuberLossOptions;
using kiln::nn::Identity;
using kiln::nn::IdentityImpl;
using kiln::nn::InstanceNorm1d;
using kiln::nn::InstanceNorm1dImpl;
using kiln::nn::InstanceNorm1dOptions;
using kiln::nn::InstanceNorm2d;
using kiln::nn::InstanceNorm2dImpl;
using kiln::nn::InstanceNorm2dOptions;
using kiln::nn::InstanceNorm3d;
using kiln::nn::InstanceNorm3dImpl;
using kiln::nn::InstanceNorm3dOptions;
using kiln::nn::InstanceNormOptions;
using kiln::nn::KLDivLoss;
using kiln::nn::KLDivLossImpl;
using kiln::nn::KLDivLossOptions;
using kiln::nn::L1Loss;
using kiln::nn::L1LossImpl;
using kiln::nn::L1LossOptions;
using kiln::nn::LayerNorm;
using kiln::nn::LayerNormImpl;
using kiln::nn::LayerNormOptions;
using kiln::nn::LeakyReLU;
using kiln::nn::LeakyReLUImpl;
using kiln::nn::LeakyReLUOptions;
using kiln::nn::Linear;
using kiln::nn::LinearImpl;
using kiln::nn::LinearOptions;
using kiln::nn::LogSigmoid;
using kiln::nn::LogSigmoidImpl;
using kiln::nn::LogSoftmax;
using kiln::nn::LogSoftmaxImpl;
using kiln::nn::LSTM;
using kiln::nn::LSTMCell;
using kiln::nn::LSTMCellImpl;
using kiln::nn::LSTMCellOptions;
using kiln::nn::LSTMImpl;
using kiln::nn::LSTMOptions;
using kiln::nn::MarginRankingLoss;
using kiln::nn::MarginRankingLossImpl;
using kiln::nn::MarginRankingLossOptions;
using kiln::nn::MaxPool1d;
using kiln::nn::MaxPool1dImpl;
using kiln::nn::MaxPool1dOptions;
using kiln::nn::MaxPool2d;
using kiln::nn::MaxPool2dImpl;
using kiln::nn::MaxPool2dOptions;
using kiln::nn::Mish;
using kiln::nn::MishImpl;
using kiln::nn::Module;
using kiln::nn::ModuleDict;
using kiln::nn::ModuleDictImpl;
using kiln::nn::ModuleHolder;
using kiln::nn::ModuleList;
using kiln::nn::ModuleListImpl;
using kiln::nn::MSELoss;
using kiln::nn::MSELossImpl;
using kiln::nn::MultiheadAttention;
using kiln::nn::MultiheadAttentionImpl;
using kiln::nn::MultiheadAttentionOptions;
using kiln::nn::MultiLabelSoftMarginLoss;
using kiln::nn::MultiLabelSoftMarginLossImpl;
using kiln::nn::MultiLabelSoftMarginLossOptions;
using kiln::nn::NLLLoss;
using kiln::nn::NLLLossImpl;
using kiln::nn::NLLLossOptions;
using kiln::nn::PairwiseDistance;
using kiln::nn::PairwiseDistanceImpl;
using kiln::nn::PairwiseDistanceOptions;
using kiln::nn::ParameterDict;
using kiln::nn::ParameterDictImpl;
using kiln::nn::ParameterList;
using kiln::nn::ParameterListImpl;
using kiln::nn::PixelShuffle;
using kiln::nn::PixelShuffleImpl;
using kiln::nn::PixelShuffleOptions;
using kiln::nn::PixelUnshuffle;
using kiln::nn::PixelUnshuffleImpl;
using kiln::nn::PixelUnshuffleOptions;
using kiln::nn::PoissonNLLLoss;
using kiln::nn::PoissonNLLLossImpl;
using kiln::nn::PoissonNLLLossOptions;
using kiln::nn::PReLU;
using kiln::nn::PReLUImpl;
using kiln::nn::PReLUOptions;
using kiln::nn::ReflectionPad1d;
using kiln::nn::ReflectionPad1dImpl;
using kiln::nn::ReflectionPad1dOptions;
using kiln::nn::ReflectionPad2d;
using kiln::nn::ReflectionPad2dImpl;
using kiln::nn::ReflectionPad2dOptions;
using kiln::nn::ReflectionPad3d;
using kiln::nn::ReflectionPad3dImpl;
using kiln::nn::ReflectionPad3dOptions;
using kiln::nn::ReLU;
using kiln::nn::ReLU6;
using kiln::nn::ReLU6Impl;
using kiln::nn::ReLU6Options;
using kiln::nn::ReLUImpl;
using kiln::nn::ReLUOptions;
using kiln::nn::ReplicationPad1d;
using kiln::nn::ReplicationPad1dImpl;
using kiln::nn::ReplicationPad1dOptions;
using kiln::nn::ReplicationPad2d;
using kiln::nn::ReplicationPad2dImpl;
using kiln::nn::ReplicationPad2dOptions;
using kiln::nn::ReplicationPad3d;
using kiln::nn::ReplicationPad3dImpl;
using kiln::nn::ReplicationPad3dOptions;
using kiln::nn::RNN;
using kiln::nn::RNNCell;
using kiln::nn::RNNCellImpl;
using kiln::nn::RNNCellOptions;
using kiln::nn::RNNImpl;
using kiln::nn::RNNOptions;
using kiln::nn::SELU;
using kiln::nn::SELUImpl;
using kiln::nn::SELUOptions;
using kiln::nn::Sequential;
using kiln::nn::SequentialImpl;
using kiln::nn::Sigmoid;
using kiln::nn::SigmoidImpl;
using kiln::nn::SiLU;
using kiln::nn::SiLUImpl;
using kiln::nn::SmoothL1Loss;
using kiln::nn::SmoothL1LossImpl;
using kiln::nn::SmoothL1LossOptions;
using kiln::nn::SoftMarginLoss;
using kiln::nn::SoftMarginLossImpl;
using kiln::nn::SoftMarginLossOptions;
using kiln::nn::Softmax;
using kiln::nn::SoftmaxImpl;
using kiln::nn::Softmin;
using kiln::nn::SoftminImpl;
using kiln::nn::SoftminOptions;
using kiln::nn::Softplus;
using kiln::nn::SoftplusImpl;
using kiln::nn::SoftplusOptions;
using kiln::nn::Softshrink;
using kiln::nn::SoftshrinkImpl;
using kiln::nn::SoftshrinkOptions;
using kiln::nn::Softsign;
using kiln::nn::SoftsignImpl;
using kiln::nn::Tanh;
using kiln::nn::TanhImpl;
using kiln::nn::Tanhshrink;
using kiln::nn::TanhshrinkImpl;
using kiln::nn::Threshold;
using kiln::nn::ThresholdImpl;
using kiln::nn::ThresholdOptions;
using kiln::nn::Transformer;
using kiln::nn::TransformerDecoder;
using kiln::nn::TransformerDecoderImpl;
using kiln::nn::TransformerDecoderLayer;
using kiln::nn::TransformerDecoderLayerImpl;
using kiln::nn::TransformerDecoderLayerOptions;
using kiln::nn::TransformerDecoderOptions;
using kiln::nn::TransformerEncoder;
using kiln::nn::TransformerEncoderImpl;
using kiln::nn::TransformerEncoderLayer;
using kiln::nn::TransformerEncoderLayerImpl;
using kiln::nn::TransformerEncoderLayerOptions;
using kiln::nn::TransformerEncoderOptions;
using kiln::nn::TransformerImpl;
using kiln::nn::TransformerOptions;
using kiln::nn::TripletMarginLoss;
using kiln::nn::TripletMarginLossImpl;
using kiln::nn::TripletMarginLossOptions;
using kiln::nn::Unflatten;
using kiln::nn::UnflattenImpl;
using kiln::nn::UnflattenOptions;
using kiln::nn::Upsample;
using kiln::nn::UpsampleImpl;
using kiln::nn::UpsampleOptions;
using kiln::nn::ZeroPad2d;
using kiln::nn::ZeroPad2dImpl;
using kiln::nn::ZeroPad2dOptions;
/// The old name of Dropout2d (channels dropped whole).
using FeatureDropout = Dropout2d;
using Dropout2dOptions = DropoutOptions;
using AdaptiveAvgPool2dOptions = kiln::ExpandingArray2;
namespace init = kiln::nn::init;

/// Options convertible to the argument the module takes.
struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}  // NOLINT
  KILN_ARG(int64_t, dim);
  operator int64_t() const { return dim_; }  // NOLINT
};
using LogSoftmaxOptions = SoftmaxOptions;
struct MSELossOptions {
  MSELossOptions(kiln::nn::Reduction r = kiln::nn::Reduction::Mean) : reduction_(r) {}  // NOLINT
  KILN_ARG(kiln::nn::Reduction, reduction);
  operator kiln::nn::Reduction() const { return reduction_; }  // NOLINT
};
struct CrossEntropyLossOptions {
  KILN_ARG(int64_t, ignore_index) = -100;
  KILN_ARG(kiln::nn::Reduction, reduction) = kiln::nn::Reduction::Mean;
  KILN_ARG(double, label_smoothing) = 0.0;
  operator kiln::nn::CrossEntropyOptions() const {  // NOLINT
    kiln::nn::CrossEntropyOptions o;
    o.reduction = reduction_;
    o.ignore_index = ignore_index_;
    o.label_smoothing = label_smoothing_;
    return o;
  }
};

namespace utils {
using kiln::nn::utils::clip_grad_value_;
/// clip_grad_norm_'s result: libtorch's is a double (read back from the
/// device). Here it converts to one when used as a number, and is read only
/// then, so a traced step that ignores it clips inside its plan; `.tensor` is
/// the 0-dim norm.
struct GradNorm {
  Tensor tensor;
  operator double() const { return tensor.item<double>(); }  // NOLINT: implicit, as libtorch's double
};
inline std::ostream& operator<<(std::ostream& os, const GradNorm& n) { return os << double(n); }
inline GradNorm clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                                double norm_type = 2.0, kiln::Loc l = kiln::Loc::current()) {
  return {kiln::nn::utils::clip_grad_norm_(parameters, max_norm, norm_type, l)};
}
inline void clip_grad_value_(const Tensor& parameter, double clip_value,
                             kiln::Loc l = kiln::Loc::current()) {
  kiln::nn::utils::clip_grad_value_(std::vector<Tensor>{parameter}, clip_value, l);
}
inline GradNorm clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2.0,
                                kiln::Loc l = kiln::Loc::current()) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, l);
}
/// Every parameter flattened, one after another, in one vector.
inline Tensor parameters_to_vector(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> flat;
  for (const Tensor& p : parameters) flat.push_back(p.reshape({-1}));
  return torch::cat(flat);
}
/// Writes consecutive pieces of `vec` into the parameters (their values; libtorch
/// makes them views of vec, which no later read can tell apart).
inline void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters) {
  TORCH_CHECK(vec.dim() == 1, "vector_to_parameters: expected a 1-D vector, got ", vec.dim(), " dims");
  int64_t total = 0;
  for (const Tensor& p : parameters) total += p.numel();
  TORCH_CHECK(vec.numel() == total, "vector_to_parameters: the vector has ", vec.numel(),
              " elements, the parameters ", total);
  kiln::NoGradGuard no_grad;
  int64_t at = 0;
  for (Tensor p : parameters) {
    p.copy_(vec.narrow(0, at, p.numel()).view_as(p));
    at += p.numel();
  }
}
namespace rnn {
/// Sequences [L_i, *] padded with padding_value to the longest and stacked:
/// [L, B, *], or [B, L, *] with batch_first.
inline Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false,
                           double padding_value = 0) {
  TORCH_CHECK(!sequences.empty(), "pad_sequence: expected at least one sequence");
  int64_t longest = 0;
  for (const Tensor& s : sequences) longest = std::max(longest, s.size(0));
  std::vector<Tensor> padded;
  for (const Tensor& s : sequences) {
    TORCH_CHECK(s.dim() == sequences[0].dim(), "pad_sequence: sequences of ", sequences[0].dim(),
                " and ", s.dim(), " dims");
    std::vector<int64_t> rest = s.sizes();
    rest[0] = longest - s.size(0);
    padded.push_back(rest[0] == 0 ? s : torch::cat({s, torch::full(rest, padding_value, s.options())}));
  }
  return torch::stack(padded, batch_first ? 0 : 1);
}
}  // namespace rnn
}  // namespace utils

namespace functional {

using kiln::relu;
using kiln::nn::functional::adaptive_avg_pool2d;
using kiln::nn::functional::avg_pool2d;
using kiln::nn::functional::bilinear;
using kiln::nn::functional::embedding_bag;
using kiln::nn::functional::EmbeddingBagFuncOptions;
using kiln::nn::functional::AvgPool2dFuncOptions;
using kiln::nn::functional::binary_cross_entropy;
using kiln::nn::functional::binary_cross_entropy_with_logits;
using kiln::nn::functional::conv1d;
using kiln::nn::functional::Conv1dFuncOptions;
using kiln::nn::functional::conv2d;
using kiln::nn::functional::Conv2dFuncOptions;
using kiln::nn::functional::conv_transpose2d;
using kiln::nn::functional::ConvTranspose2dFuncOptions;
using kiln::nn::functional::cross_entropy;
using kiln::nn::functional::dropout;
using kiln::nn::functional::dropout2d;
using kiln::nn::functional::elu;
using kiln::nn::functional::embedding;
using kiln::nn::functional::gelu;
using kiln::nn::functional::hardtanh;
using kiln::nn::functional::huber_loss;
using kiln::nn::functional::interpolate;
using InterpolateFuncOptions = kiln::nn::InterpolateOptions;
using kiln::nn::functional::l1_loss;
using kiln::nn::functional::layer_norm;
using kiln::nn::functional::leaky_relu;
using kiln::nn::functional::max_pool2d;
using kiln::nn::functional::MaxPool2dFuncOptions;
using kiln::nn::functional::mse_loss;
using kiln::nn::functional::nll_loss;
using kiln::nn::functional::normalize;
using kiln::nn::functional::one_hot;
using kiln::nn::functional::relu6;
using kiln::nn::functional::selu;
using kiln::nn::functional::silu;
using kiln::nn::functional::smooth_l1_loss;
using kiln::nn::functional::softplus;
using Loc = kiln::Loc;
using Reduction_t = kiln::nn::Reduction;

struct ReLUFuncOptions {
  ReLUFuncOptions(bool inplace = false) : inplace_(inplace) {}  // NOLINT
  KILN_ARG(bool, inplace);
};
using ReLU6FuncOptions = ReLUFuncOptions;
using SELUFuncOptions = kiln::nn::SELUOptions;
struct LeakyReLUFuncOptions {
  KILN_ARG(double, negative_slope) = 1e-2;
  KILN_ARG(bool, inplace) = false;
};
using ELUFuncOptions = kiln::nn::ELUOptions;
struct GELUFuncOptions {
  KILN_ARG(std::string, approximate) = "none";
};
using HardtanhFuncOptions = kiln::nn::HardtanhOptions;
using SoftplusFuncOptions = kiln::nn::SoftplusOptions;
struct SoftmaxFuncOptions {
  SoftmaxFuncOptions(int64_t dim) : dim_(dim) {}  // NOLINT
  KILN_ARG(int64_t, dim);
  KILN_ARG(std::optional<kiln::DType>, dtype);
};
using LogSoftmaxFuncOptions = SoftmaxFuncOptions;
struct DropoutFuncOptions {
  KILN_ARG(double, p) = 0.5;
  KILN_ARG(bool, training) = true;
  KILN_ARG(bool, inplace) = false;
};
using Dropout2dFuncOptions = DropoutFuncOptions;
struct LayerNormFuncOptions {
  LayerNormFuncOptions(std::vector<int64_t> normalized_shape)  // NOLINT
      : normalized_shape_(std::move(normalized_shape)) {}
  KILN_ARG(std::vector<int64_t>, normalized_shape);
  KILN_ARG(Tensor, weight);
  KILN_ARG(Tensor, bias);
  KILN_ARG(double, eps) = 1e-5;
};
struct BatchNormFuncOptions {
  KILN_ARG(Tensor, weight);
  KILN_ARG(Tensor, bias);
  KILN_ARG(bool, training) = false;
  KILN_ARG(double, momentum) = 0.1;
  KILN_ARG(double, eps) = 1e-5;
};
struct EmbeddingFuncOptions {
  KILN_ARG(std::optional<int64_t>, padding_idx);
};
struct GroupNormFuncOptions {
  GroupNormFuncOptions(int64_t num_groups) : num_groups_(num_groups) {}  // NOLINT
  KILN_ARG(int64_t, num_groups);
  KILN_ARG(Tensor, weight);
  KILN_ARG(Tensor, bias);
  KILN_ARG(double, eps) = 1e-5;
};
using KLDivFuncOptions = kiln::nn::KLDivLossOptions;
struct AdaptiveMaxPool2dFuncOptions {
  AdaptiveMaxPool2dFuncOptions(kiln::ExpandingArray2 output_size)  // NOLINT
      : output_size_(output_size) {}
  KILN_ARG(kiln::ExpandingArray2, output_size);
};
using UnflattenFuncOptions = kiln::nn::UnflattenOptions;
using AdaptiveAvgPool2dFuncOptions = kiln::ExpandingArray2;
struct NLLLossFuncOptions {
  KILN_ARG(Tensor, weight);
  KILN_ARG(int64_t, ignore_index) = -100;
  KILN_ARG(Reduction_t, reduction) = Reduction_t::Mean;
};
struct CrossEntropyFuncOptions {
  KILN_ARG(Tensor, weight);
  KILN_ARG(int64_t, ignore_index) = -100;
  KILN_ARG(Reduction_t, reduction) = Reduction_t::Mean;
  KILN_ARG(double, label_smoothing) = 0.0;
};
struct MSELossFuncOptions {
  MSELossFuncOptions(Reduction_t r = Reduction_t::Mean) : reduction_(r) {}  // NOLINT
  KILN_ARG(Reduction_t, reduction);
};
using L1LossFuncOptions = MSELossFuncOptions;
struct SmoothL1LossFuncOptions {
  SmoothL1LossFuncOptions(Reduction_t r = Reduction_t::Mean) : reduction_(r) {}  // NOLINT
  KILN_ARG(Reduction_t, reduction);
  KILN_ARG(double, beta) = 1.0;
};
struct HuberLossFuncOptions {
  HuberLossFuncOptions(Reduction_t r = Reduction_t::Mean) : reduction_(r) {}  // NOLINT
  KILN_ARG(Reduction_t, reduction);
  KILN_ARG(double, delta) = 1.0;
};
struct BinaryCrossEntropyFuncOptions {
  KILN_ARG(Tensor, weight);
  KILN_ARG(Reduction_t, reduction) = Reduction_t::Mean;
};
struct BinaryCrossEntropyWithLogitsFuncOptions {
  KILN_ARG(Tensor, weight);
  KILN_ARG(Reduction_t, reduction) = Reduction_t::Mean;
  KILN_ARG(Tensor, pos_weight);
};
struct NormalizeFuncOptions {
  KILN_ARG(double, p) = 2.0;
  KILN_ARG(int64_t, dim) = 1;
  KILN_ARG(double, eps) = 1e-12;
};
struct PadFuncOptions {
  PadFuncOptions(std::vector<int64_t> pad) : pad_(std::move(pad)) {}  // NOLINT
  KILN_ARG(std::vector<int64_t>, pad);
  KILN_ARG(double, value) = 0.0;
  /// torch::kConstant, kReflect, kReplicate or kCircular.
  KILN_ARG(kiln::nn::PadMode, mode) = kiln::nn::PadMode::Constant;
};
struct InstanceNormFuncOptions {
  KILN_ARG(Tensor, running_mean);
  KILN_ARG(Tensor, running_var);
  KILN_ARG(Tensor, weight);
  KILN_ARG(Tensor, bias);
  KILN_ARG(bool, use_input_stats) = true;
  KILN_ARG(double, momentum) = 0.1;
  KILN_ARG(double, eps) = 1e-5;
};
using kiln::nn::functional::AvgPool1dFuncOptions;
using kiln::nn::functional::MaxPool1dFuncOptions;
using AdaptiveAvgPool1dFuncOptions = kiln::nn::AdaptivePool1dOptions;
using AdaptiveMaxPool1dFuncOptions = kiln::nn::AdaptivePool1dOptions;
using SoftminFuncOptions = kiln::nn::SoftminOptions;
using SoftshrinkFuncOptions = kiln::nn::SoftshrinkOptions;
using HardshrinkFuncOptions = kiln::nn::HardshrinkOptions;
using ThresholdFuncOptions = kiln::nn::ThresholdOptions;
using CELUFuncOptions = kiln::nn::CELUOptions;
using GLUFuncOptions = kiln::nn::GLUOptions;
using MarginRankingLossFuncOptions = kiln::nn::MarginRankingLossOptions;
using HingeEmbeddingLossFuncOptions = kiln::nn::HingeEmbeddingLossOptions;
using SoftMarginLossFuncOptions = kiln::nn::SoftMarginLossOptions;
using CosineEmbeddingLossFuncOptions = kiln::nn::CosineEmbeddingLossOptions;
using TripletMarginLossFuncOptions = kiln::nn::TripletMarginLossOptions;
using MultilabelSoftMarginLossFuncOptions = kiln::nn::MultiLabelSoftMarginLossOptions;
using MultiLabelSoftMarginLossFuncOptions = kiln::nn::MultiLabelSoftMarginLossOptions;
using PoissonNLLLossFuncOptions = kiln::nn::PoissonNLLLossOptions;
using PixelShuffleFuncOptions = kiln::nn::PixelShuffleOptions;
using PixelUnshuffleFuncOptions = kiln::nn::PixelUnshuffleOptions;
using CosineSimilarityFuncOptions = kiln::nn::CosineSimilarityOptions;
using PairwiseDistanceFuncOptions = kiln::nn::PairwiseDistanceOptions;

// The calls with an options struct (the defaulted forms are Kiln's, above).
inline Tensor relu(const Tensor& x, const ReLUFuncOptions&, Loc l = Loc::current()) {
  return x.relu(l);
}
inline Tensor relu6(const Tensor& x, const ReLU6FuncOptions&, Loc l = Loc::current()) {
  return kiln::nn::functional::relu6(x, l);
}
inline Tensor selu(const Tensor& x, const SELUFuncOptions&, Loc l = Loc::current()) {
  return kiln::nn::functional::selu(x, l);
}
inline Tensor leaky_relu(const Tensor& x, const LeakyReLUFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::leaky_relu(x, o.negative_slope(), l);
}
inline Tensor elu(const Tensor& x, const ELUFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::elu(x, o.alpha(), l);
}
inline Tensor gelu(const Tensor& x, const GELUFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::gelu(x, o.approximate(), l);
}
inline Tensor hardtanh(const Tensor& x, const HardtanhFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::hardtanh(x, o.min_val(), o.max_val(), l);
}
inline Tensor softplus(const Tensor& x, const SoftplusFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::softplus(x, o.beta(), o.threshold(), l);
}
inline Tensor softmax(const Tensor& x, const SoftmaxFuncOptions& o, Loc l = Loc::current()) {
  return (o.dtype() ? x.to(*o.dtype(), l) : x).softmax(o.dim(), l);
}
inline Tensor log_softmax(const Tensor& x, const LogSoftmaxFuncOptions& o, Loc l = Loc::current()) {
  return (o.dtype() ? x.to(*o.dtype(), l) : x).log_softmax(o.dim(), l);
}
inline Tensor dropout(const Tensor& x, const DropoutFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::dropout(x, o.p(), o.training(), l);
}
inline Tensor dropout2d(const Tensor& x, const Dropout2dFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::dropout2d(x, o.p(), o.training(), l);
}
inline Tensor layer_norm(const Tensor& x, const LayerNormFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::layer_norm(x, o.normalized_shape(), o.weight(), o.bias(), o.eps(),
                                          l);
}
inline Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::batch_norm(x, running_mean, running_var, o.weight(), o.bias(),
                                          o.training(), o.momentum(), o.eps(), l);
}
inline Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& o,
                        Loc l = Loc::current()) {
  if (!o.padding_idx()) return kiln::nn::functional::embedding(input, weight, l);
  const int64_t p = *o.padding_idx();
  return kiln::nn::functional::embedding(input, weight, p < 0 ? p + weight.size(0) : p, l);
}
inline Tensor group_norm(const Tensor& x, const GroupNormFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::group_norm(x, o.num_groups(), o.weight(), o.bias(), o.eps(), l);
}
inline Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivFuncOptions& o = {},
                     Loc l = Loc::current()) {
  return kiln::nn::functional::kl_div(input, target, o.reduction(), o.log_target(), l);
}
inline Tensor adaptive_max_pool2d(const Tensor& x, const AdaptiveMaxPool2dFuncOptions& o,
                                  Loc l = Loc::current()) {
  return kiln::nn::functional::adaptive_max_pool2d(x, o.output_size(), l);
}
inline Tensor mish(const Tensor& x, Loc l = Loc::current()) {
  return kiln::nn::functional::mish(x, l);
}
inline Tensor prelu(const Tensor& x, const Tensor& weight, Loc l = Loc::current()) {
  return kiln::nn::functional::prelu(x, weight, l);
}
inline Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                     Loc l = Loc::current()) {
  Tensor y = x.matmul(weight.t(l), l);
  return bias.defined() ? y.add(bias, 1, l) : y;
}
inline Tensor nll_loss(const Tensor& x, const Tensor& target, const NLLLossFuncOptions& o,
                       Loc l = Loc::current()) {
  return kiln::nn::functional::nll_loss(x, target, o.weight(), o.reduction(), o.ignore_index(), l);
}
inline Tensor cross_entropy(const Tensor& x, const Tensor& target, const CrossEntropyFuncOptions& o,
                            Loc l = Loc::current()) {
  return ::torch::cross_entropy_loss(kiln::TensorAt(x, l), target, o.weight(),
                                     o.reduction() == Reduction_t::None  ? Reduction::None
                                     : o.reduction() == Reduction_t::Sum ? Reduction::Sum
                                                                         : Reduction::Mean,
                                     o.ignore_index(), o.label_smoothing());
}
inline Tensor mse_loss(const Tensor& x, const Tensor& target, const MSELossFuncOptions& o,
                       Loc l = Loc::current()) {
  return kiln::nn::functional::mse_loss(x, target, o.reduction(), l);
}
inline Tensor l1_loss(const Tensor& x, const Tensor& target, const L1LossFuncOptions& o,
                      Loc l = Loc::current()) {
  return kiln::nn::functional::l1_loss(x, target, o.reduction(), l);
}
/// The options' beta. (libtorch 1.13's functional ignores options.beta() and
/// reads only its fourth argument, default 1, below; its SmoothL1Loss module and
/// later libtorch read the options' beta, as here.)
inline Tensor smooth_l1_loss(const Tensor& x, const Tensor& target,
                             const SmoothL1LossFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::smooth_l1_loss(x, target, o.reduction(), o.beta(), l);
}
/// libtorch 1.13's form with beta as a fourth argument, which wins over the options'.
inline Tensor smooth_l1_loss(const Tensor& x, const Tensor& target, const SmoothL1LossFuncOptions& o,
                             double beta, Loc l = Loc::current()) {
  return kiln::nn::functional::smooth_l1_loss(x, target, o.reduction(), beta, l);
}
inline Tensor huber_loss(const Tensor& x, const Tensor& target, const HuberLossFuncOptions& o,
                         Loc l = Loc::current()) {
  return kiln::nn::functional::huber_loss(x, target, o.reduction(), o.delta(), l);
}
inline Tensor binary_cross_entropy(const Tensor& x, const Tensor& target,
                                   const BinaryCrossEntropyFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::binary_cross_entropy(x, target, o.weight(), o.reduction(), l);
}
inline Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& target,
                                               const BinaryCrossEntropyWithLogitsFuncOptions& o,
                                               Loc l = Loc::current()) {
  return ::torch::binary_cross_entropy_with_logits(
      kiln::TensorAt(x, l), target, o.weight(), o.pos_weight(),
      o.reduction() == Reduction_t::None  ? Reduction::None
      : o.reduction() == Reduction_t::Sum ? Reduction::Sum
                                          : Reduction::Mean);
}
inline Tensor normalize(const Tensor& x, const NormalizeFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::normalize(x, o.p(), o.dim(), o.eps(), l);
}
inline Tensor pad(const Tensor& x, const PadFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::pad(x, o.pad(), o.mode(), o.value(), l);
}
using kiln::nn::functional::cosine_embedding_loss;
using kiln::nn::functional::hinge_embedding_loss;
using kiln::nn::functional::margin_ranking_loss;
using kiln::nn::functional::multilabel_soft_margin_loss;
using kiln::nn::functional::poisson_nll_loss;
using kiln::nn::functional::soft_margin_loss;
using kiln::nn::functional::triplet_margin_loss;
using kiln::nn::functional::adaptive_avg_pool1d;
using kiln::nn::functional::adaptive_max_pool1d;
using kiln::nn::functional::avg_pool1d;
using kiln::nn::functional::celu;
using kiln::nn::functional::glu;
using kiln::nn::functional::hardshrink;
using kiln::nn::functional::hardsigmoid;
using kiln::nn::functional::hardswish;
using kiln::nn::functional::logsigmoid;
using kiln::nn::functional::max_pool1d;
using kiln::nn::functional::softmin;
using kiln::nn::functional::softsign;
using kiln::nn::functional::softshrink;
using kiln::nn::functional::tanhshrink;
using kiln::nn::functional::threshold;
inline Tensor adaptive_avg_pool1d(const Tensor& x, const AdaptiveAvgPool1dFuncOptions& o,
                                  Loc l = Loc::current()) {
  return kiln::nn::functional::adaptive_avg_pool1d(x, o.output_size(), l);
}
inline Tensor adaptive_max_pool1d(const Tensor& x, const AdaptiveMaxPool1dFuncOptions& o,
                                  Loc l = Loc::current()) {
  return kiln::nn::functional::adaptive_max_pool1d(x, o.output_size(), l);
}
inline Tensor softmin(const Tensor& x, const SoftminFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::softmin(x, o.dim(), l);
}
inline Tensor softshrink(const Tensor& x, const SoftshrinkFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::softshrink(x, o.lambda(), l);
}
inline Tensor hardshrink(const Tensor& x, const HardshrinkFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::hardshrink(x, o.lambda(), l);
}
inline Tensor threshold(const Tensor& x, const ThresholdFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::threshold(x, o.threshold(), o.value(), l);
}
inline Tensor celu(const Tensor& x, const CELUFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::celu(x, o.alpha(), l);
}
inline Tensor glu(const Tensor& x, const GLUFuncOptions& o, Loc l = Loc::current()) {
  return kiln::nn::functional::glu(x, o.dim(), l);
}
inline Tensor instance_norm(const Tensor& x, const InstanceNormFuncOptions& o = {},
                            Loc l = Loc::current()) {
  return kiln::nn::functional::instance_norm(x, o.running_mean(), o.running_var(), o.weight(),
                                             o.bias(), o.use_input_stats(), o.momentum(), o.eps(),
                                             l);
}
inline Tensor pixel_shuffle(const Tensor& x, const PixelShuffleFuncOptions& o,
                            Loc l = Loc::current()) {
  return kiln::nn::functional::pixel_shuffle(x, o.upscale_factor(), l);
}
inline Tensor pixel_unshuffle(const Tensor& x, const PixelUnshuffleFuncOptions& o,
                              Loc l = Loc::current()) {
  return kiln::nn::functional::pixel_unshuffle(x, o.downscale_factor(), l);
}
inline Tensor cosine_similarity(const Tensor& x1, const Tensor& x2,
                                const CosineSimilarityFuncOptions& o = {},
                                Loc l = Loc::current()) {
  return kiln::nn::functional::cosine_similarity(x1, x2, o.dim(), o.eps(), l);
}
inline Tensor pairwise_distance(const Tensor& x1, const Tensor& x2,
                                const PairwiseDistanceFuncOptions& o = {},
                                Loc l = Loc::current()) {
  return kiln::nn::functional::pairwise_distance(x1, x2, o.p(), o.eps(), o.keepdim(), l);
}

}  // namespace functional

}  // namespace torch::nn

namespace torch {
// At namespace level, as libtorch's (torch::pixel_shuffle(x, 2), ...).
using kiln::nn::functional::cosine_similarity;
using kiln::nn::functional::pairwise_distance;
using kiln::nn::functional::pixel_shuffle;
using kiln::nn::functional::pixel_unshuffle;
}  // namespace torch

/// Defines `Name`, a module holder for `Name##Impl` (libtorch's TORCH_MODULE):
///   struct NetImpl : torch::nn::Module { ... };  TORCH_MODULE(Net);
///   Net net;  net->forward(x);  net(x);
#define TORCH_MODULE_IMPL(Name, ImplType)                    \
  class Name : public ::torch::nn::ModuleHolder<ImplType> {  \
   public:                                                   \
    using ::torch::nn::ModuleHolder<ImplType>::ModuleHolder; \
    using Impl = ImplType;                                   \
  }
#define TORCH_MODULE(Name) TORCH_MODULE_IMPL(Name, Name##Impl)
