// Modules, functions and initialisers libtorch has and nn.h / nn_conv.h did
// not: the transposed convolution, LeakyReLU, Dropout2d, Softmax, the loss
// modules, weighted nll_loss and binary_cross_entropy, smooth_l1_loss,
// l1_loss, elu/selu/hardtanh, normalize, constant padding, and nn::init.
// Each is a composite of table ops (frontend/nn_parity.cpp says how), so it
// runs eagerly, traces and differentiates like the rest.
#pragma once

#include <optional>
#include <vector>

#include "frontend/nn.h"
#include "frontend/nn_conv.h"

namespace kiln {

/// The transposed convolution (conv2d's gradient with respect to its input) of
/// input [N, C_in, H, W] with weight [C_in, C_out / groups, kH, kW], plus bias
/// [C_out]: [N, C_out, H', W'] with H' = (H - 1) stride - 2 padding +
/// dilation (kH - 1) + output_padding + 1 (likewise W'). Arguments in
/// libtorch's order.
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        ExpandingArray2 stride = 1, ExpandingArray2 padding = 0,
                        ExpandingArray2 output_padding = 0, int64_t groups = 1,
                        ExpandingArray2 dilation = 1, KILN_LOC);

namespace nn {

/// How interpolate fills the output: from the nearest input element, or with
/// the linear (3-D input) or bilinear (4-D input) weights of the two nearest.
enum class InterpolateMode { Nearest, Linear, Bilinear };

/// interpolate's arguments (torch.nn.functional.interpolate): an output size or
/// a scale factor per spatial dim (one value serves every dim), the mode, and
/// for the linear modes whether the corner pixels' centres line up.
struct InterpolateOptions {
  KILN_ARG(std::vector<int64_t>, size);
  KILN_ARG(std::vector<double>, scale_factor);
  KILN_ARG(InterpolateMode, mode) = InterpolateMode::Nearest;
  KILN_ARG(std::optional<bool>, align_corners);
};

namespace functional {
/// Resizes the spatial dims of x ([N, C, L], [N, C, H, W] or [N, C, D, H, W];
/// linear needs 3-D, bilinear 4-D) as PyTorch's interpolate: nearest takes
/// input element floor(o * scale) along each dim, the linear modes weigh the
/// two nearest (align_corners false: pixel centres, clamped at the border).
/// Built of index_select and arithmetic, so it traces and differentiates.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options, KILN_LOC);
struct ConvTranspose2dFuncOptions {
  KILN_ARG(Tensor, bias);
  KILN_ARG(ExpandingArray2, stride) = 1;
  KILN_ARG(ExpandingArray2, padding) = 0;
  KILN_ARG(ExpandingArray2, output_padding) = 0;
  KILN_ARG(int64_t, groups) = 1;
  KILN_ARG(ExpandingArray2, dilation) = 1;
};
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight,
                        const ConvTranspose2dFuncOptions& options = {}, KILN_LOC);
/// Zeroes whole channels (dim 1 of [N, C, H, W], dim 0 of [C, H, W]) with
/// probability p when training, scaling the rest by 1 / (1 - p).
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true, KILN_LOC);
/// nll_loss with a per-class weight [C] (undefined: all ones): the mean is
/// sum(w[y_i] l_i) / sum(w[y_i]) over the rows that count, as PyTorch's.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight,
                Reduction r = Reduction::Mean, int64_t ignore_index = -100, KILN_LOC);
/// binary_cross_entropy with a weight broadcast to the input (undefined: none).
Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target, const Tensor& weight,
                            Reduction r = Reduction::Mean, KILN_LOC);
/// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction r = Reduction::Mean,
                      double beta = 1.0, KILN_LOC);
/// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta) (d = input - target):
/// delta times smooth_l1_loss with beta = delta, as PyTorch's huber_loss.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction r = Reduction::Mean,
                  double delta = 1.0, KILN_LOC);
/// |input - target|, reduced.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction r = Reduction::Mean, KILN_LOC);
/// alpha (exp(x) - 1) for x <= 0, x otherwise.
Tensor elu(const Tensor& x, double alpha = 1.0, KILN_LOC);
/// scale * elu(x, alpha) with PyTorch's constants.
Tensor selu(const Tensor& x, KILN_LOC);
/// x clamped to [min_val, max_val]; relu6 is hardtanh(x, 0, 6).
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0, KILN_LOC);
Tensor relu6(const Tensor& x, KILN_LOC);
/// x / max(||x||_p over dim, eps).
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12, KILN_LOC);
/// Pads the last dims with `value`: pad = {left, right} for the last dim, then
/// {top, bottom} for the one before, and so on (torch.nn.functional.pad, mode
/// "constant"); negative entries crop.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, double value = 0.0, KILN_LOC);
}  // namespace functional

struct ConvTranspose2dOptions {
  ConvTranspose2dOptions(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  KILN_ARG(int64_t, in_channels);
  KILN_ARG(int64_t, out_channels);
  KILN_ARG(ExpandingArray2, kernel_size);
  KILN_ARG(ExpandingArray2, stride) = 1;
  KILN_ARG(ExpandingArray2, padding) = 0;
  KILN_ARG(ExpandingArray2, output_padding) = 0;
  KILN_ARG(int64_t, groups) = 1;
  KILN_ARG(bool, bias) = true;
  KILN_ARG(ExpandingArray2, dilation) = 1;
};

/// conv_transpose2d with a weight [in, out / groups, kH, kW] and bias [out],
/// both initialised uniform in +-1/sqrt(out / groups * kH * kW), as PyTorch's
/// (whose fan-in is computed from the weight's dim 1).
class ConvTranspose2dImpl : public Module {
 public:
  explicit ConvTranspose2dImpl(const ConvTranspose2dOptions& options);
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : ConvTranspose2dImpl(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)) {}
  Tensor forward(const Tensor& x, KILN_LOC);
  std::string repr() const override;
  Tensor weight, bias;
  ConvTranspose2dOptions options;
};

struct LeakyReLUOptions {
  KILN_ARG(double, negative_slope) = 1e-2;
  KILN_ARG(bool, inplace) = false;
};
class LeakyReLUImpl : public Module {
 public:
  explicit LeakyReLUImpl(const LeakyReLUOptions& options = {})
      : Module("LeakyReLU"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC) {
    return functional::leaky_relu(x, options.negative_slope(), loc);
  }
  std::string repr() const override;
  LeakyReLUOptions options;
};

class Dropout2dImpl : public Module {
 public:
  explicit Dropout2dImpl(const DropoutOptions& options = {});
  Tensor forward(const Tensor& x, KILN_LOC) {
    return functional::dropout2d(x, options.p(), training_for_forward(), loc);
  }
  std::string repr() const override;
  DropoutOptions options;
};

/// softmax / log_softmax over `dim`, as modules.
class SoftmaxImpl : public Module {
 public:
  explicit SoftmaxImpl(int64_t dim) : Module("Softmax"), dim(dim) {}
  Tensor forward(const Tensor& x, KILN_LOC) { return x.softmax(dim, loc); }
  int64_t dim;
};
class LogSoftmaxImpl : public Module {
 public:
  explicit LogSoftmaxImpl(int64_t dim) : Module("LogSoftmax"), dim(dim) {}
  Tensor forward(const Tensor& x, KILN_LOC) { return x.log_softmax(dim, loc); }
  int64_t dim;
};
class IdentityImpl : public Module {
 public:
  IdentityImpl() : Module("Identity") {}
  Tensor forward(const Tensor& x) { return x; }
};

/// The options of the loss modules: the reduction, and for some a class weight.
struct NLLLossOptions {
  KILN_ARG(Tensor, weight);
  KILN_ARG(int64_t, ignore_index) = -100;
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
};
struct BCELossOptions {
  KILN_ARG(Tensor, weight);
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
};
struct BCEWithLogitsLossOptions {
  KILN_ARG(Tensor, weight);
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
  KILN_ARG(Tensor, pos_weight);
};
struct L1LossOptions {
  L1LossOptions(Reduction r = Reduction::Mean) : reduction_(r) {}  // NOLINT
  KILN_ARG(Reduction, reduction);
};
struct SmoothL1LossOptions {
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
  KILN_ARG(double, beta) = 1.0;
};
struct HuberLossOptions {
  KILN_ARG(Reduction, reduction) = Reduction::Mean;
  KILN_ARG(double, delta) = 1.0;
};

class NLLLossImpl : public Module {
 public:
  explicit NLLLossImpl(const NLLLossOptions& options = {}) : Module("NLLLoss"), options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target, KILN_LOC) {
    return functional::nll_loss(input, target, options.weight(), options.reduction(),
                                options.ignore_index(), loc);
  }
  NLLLossOptions options;
};
class BCELossImpl : public Module {
 public:
  explicit BCELossImpl(const BCELossOptions& options = {}) : Module("BCELoss"), options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target, KILN_LOC) {
    return functional::binary_cross_entropy(input, target, options.weight(), options.reduction(),
                                            loc);
  }
  BCELossOptions options;
};
class BCEWithLogitsLossImpl : public Module {
 public:
  explicit BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options = {})
      : Module("BCEWithLogitsLoss"), options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target, KILN_LOC);
  BCEWithLogitsLossOptions options;
};
class L1LossImpl : public Module {
 public:
  explicit L1LossImpl(const L1LossOptions& options = {}) : Module("L1Loss"), options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target, KILN_LOC) {
    return functional::l1_loss(input, target, options.reduction(), loc);
  }
  L1LossOptions options;
};
class SmoothL1LossImpl : public Module {
 public:
  explicit SmoothL1LossImpl(const SmoothL1LossOptions& options = {})
      : Module("SmoothL1Loss"), options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target, KILN_LOC) {
    return functional::smooth_l1_loss(input, target, options.reduction(), options.beta(), loc);
  }
  SmoothL1LossOptions options;
};
/// Upsample: interpolate with its options (size or scale_factor, mode, align_corners).
class UpsampleImpl : public Module {
 public:
  explicit UpsampleImpl(const InterpolateOptions& options = {})
      : Module("Upsample"), options(options) {}
  Tensor forward(const Tensor& x, KILN_LOC) { return functional::interpolate(x, options, loc); }
  InterpolateOptions options;
};
class HuberLossImpl : public Module {
 public:
  explicit HuberLossImpl(const HuberLossOptions& options = {})
      : Module("HuberLoss"), options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target, KILN_LOC) {
    return functional::huber_loss(input, target, options.reduction(), options.delta(), loc);
  }
  HuberLossOptions options;
};

/// Modules in a list, registered as "0", "1", ...; forward is the caller's to write.
class ModuleListImpl : public Module {
 public:
  ModuleListImpl() : Module("ModuleList") {}
  template <class... Holders>
  explicit ModuleListImpl(Holders&&... hs) : Module("ModuleList") {
    (push_back(std::forward<Holders>(hs)), ...);
  }
  template <class Holder>
  requires requires(const Holder& h) { h.ptr(); }
  void push_back(Holder h) { push_back(std::static_pointer_cast<Module>(h.ptr())); }
  void push_back(std::shared_ptr<Module> m) {
    modules_.push_back(m);
    register_module_ptr(std::to_string(modules_.size() - 1), std::move(m));
  }
  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  std::shared_ptr<Module> operator[](size_t i) const { return modules_.at(i); }
  std::shared_ptr<Module> ptr(size_t i) const { return modules_.at(i); }
  /// The i-th module as a T (an Impl type), or an error naming both.
  template <class T>
  std::shared_ptr<T> ptr(size_t i) const {
    auto p = std::dynamic_pointer_cast<T>(modules_.at(i));
    if (!p)
      throw Error("ModuleList: module " + std::to_string(i) + " is a " + modules_.at(i)->name());
    return p;
  }
  template <class T>
  T& at(size_t i) const {
    return *ptr<T>(i);
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

/// Modules by name, in insertion order (libtorch's ModuleDict), each registered
/// under its key; forward is the caller's to write.
class ModuleDictImpl : public Module {
 public:
  using Items = OrderedDict<std::string, std::shared_ptr<Module>>;
  ModuleDictImpl() : Module("ModuleDict") {}
  explicit ModuleDictImpl(
      const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules)
      : Module("ModuleDict") {
    update(modules);
  }
  explicit ModuleDictImpl(const Items& modules) : Module("ModuleDict") {
    for (const auto& item : modules) insert(item.key(), item.value());
  }
  /// Adds `module` under `key`, or replaces the module already there.
  void insert(const std::string& key, std::shared_ptr<Module> module) {
    if (std::shared_ptr<Module>* old = modules_.find(key)) {
      *old = module;
      for (auto& [name, child] : children_)
        if (name == key) child = std::move(module);
      return;
    }
    modules_.insert(key, module);
    register_module_ptr(key, std::move(module));
  }
  template <class Holder>
  requires requires(const Holder& h) { h.ptr(); }
  void insert(const std::string& key, const Holder& h) {
    insert(key, std::static_pointer_cast<Module>(h.ptr()));
  }
  void update(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules) {
    for (const auto& [key, m] : modules) insert(key, m);
  }
  /// The module under `key` (an error naming it when there is none).
  std::shared_ptr<Module> operator[](const std::string& key) const { return modules_[key]; }
  /// The module under `key` as a T (an Impl type), or an error naming both.
  template <class T>
  T& at(const std::string& key) const {
    auto* p = dynamic_cast<T*>(modules_[key].get());
    if (!p) throw Error("ModuleDict: module '" + key + "' is a " + modules_[key]->name());
    return *p;
  }
  bool contains(const std::string& key) const { return modules_.contains(key); }
  /// Removes the module under `key` and returns it.
  std::shared_ptr<Module> pop(const std::string& key) {
    std::shared_ptr<Module> m = modules_[key];
    std::erase_if(modules_, [&](const auto& item) { return item.key() == key; });
    std::erase_if(children_, [&](const auto& child) { return child.first == key; });
    return m;
  }
  void clear() {
    for (const std::string& key : keys()) pop(key);
  }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  std::vector<std::string> keys() const { return modules_.keys(); }
  std::vector<std::shared_ptr<Module>> values() const { return modules_.values(); }
  const Items& items() const { return modules_; }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  Items modules_ = Items("ModuleDict key");
};

using ModuleList = ModuleHolder<ModuleListImpl>;
using ModuleDict = ModuleHolder<ModuleDictImpl>;
using ConvTranspose2d = ModuleHolder<ConvTranspose2dImpl>;
using LeakyReLU = ModuleHolder<LeakyReLUImpl>;
using Dropout2d = ModuleHolder<Dropout2dImpl>;
using Softmax = ModuleHolder<SoftmaxImpl>;
using LogSoftmax = ModuleHolder<LogSoftmaxImpl>;
using Identity = ModuleHolder<IdentityImpl>;
using NLLLoss = ModuleHolder<NLLLossImpl>;
using BCELoss = ModuleHolder<BCELossImpl>;
using BCEWithLogitsLoss = ModuleHolder<BCEWithLogitsLossImpl>;
using L1Loss = ModuleHolder<L1LossImpl>;
using SmoothL1Loss = ModuleHolder<SmoothL1LossImpl>;
using HuberLoss = ModuleHolder<HuberLossImpl>;
using Upsample = ModuleHolder<UpsampleImpl>;
using UpsampleOptions = InterpolateOptions;

/// Parameter initialisers (torch::nn::init): each fills `t` in place without
/// recording a gradient, from the global generator, and returns it. fan_in and
/// fan_out are PyTorch's: dim 1 and dim 0 times the receptive field (the
/// product of the dims after the first two).
namespace init {
enum class Nonlinearity { Linear, Conv2D, Sigmoid, Tanh, ReLU, LeakyReLU };
enum class FanMode { FanIn, FanOut };
/// The gain PyTorch recommends for a nonlinearity (calculate_gain).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);
Tensor uniform_(Tensor t, double low = 0, double high = 1);
Tensor normal_(Tensor t, double mean = 0, double std = 1);
Tensor constant_(Tensor t, Scalar value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
Tensor xavier_uniform_(Tensor t, double gain = 1.0);
Tensor xavier_normal_(Tensor t, double gain = 1.0);
Tensor kaiming_uniform_(Tensor t, double a = 0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
Tensor kaiming_normal_(Tensor t, double a = 0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
/// The identity in a 2-dim tensor (ones on the main diagonal of a rectangle).
Tensor eye_(Tensor t);
/// A (semi-)orthogonal matrix, times gain, in t viewed as [size(0), rest]:
/// PyTorch's rule (the Q of a normal matrix's QR, R's diagonal positive).
Tensor orthogonal_(Tensor t, double gain = 1.0);
}  // namespace init

}  // namespace nn
}  // namespace kiln
