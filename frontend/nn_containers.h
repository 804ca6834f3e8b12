// ParameterList and ParameterDict as libtorch's (1.13): modules that hold
// parameters, not submodules. Each parameter is registered on the container
// itself (under "0", "1", ... or its key), so named_parameters() of a module
// that registers a ParameterList "scales" lists "scales.0", "scales.1", ...,
// and an optimizer built from parameters() updates them.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "frontend/nn.h"

namespace kiln::detail {
/// ParameterList's and ParameterDict's printout: one line per parameter, with
/// its dtype and shape, as libtorch prints them.
inline std::string parameters_repr(const std::string& name,
                                   const OrderedDict<std::string, Tensor>& params) {
  std::ostringstream s;
  s << name << "(\n";
  for (const auto& item : params)
    s << "(" << item.key() << "): Parameter containing: [" << dtype_name(item.value().dtype())
      << " of size " << shape_str(item.value().sizes()) << "]\n";
  s << ")";
  return s.str();
}
}  // namespace kiln::detail

namespace kiln::nn {

/// Parameters in a list, registered as "0", "1", ... in order. Each keeps its
/// requires_grad (libtorch's append registers a tensor with its own flag).
class ParameterListImpl : public Module {
 public:
  using Item = OrderedDict<std::string, Tensor>::Item;
  ParameterListImpl() : Module("ParameterList") {}
  template <class... Tensors>
  requires(sizeof...(Tensors) > 0 && (std::is_convertible_v<const Tensors&, const Tensor&> &&
                                      ...)) explicit ParameterListImpl(const Tensors&... params)
      : ParameterListImpl() {
    (append(params), ...);
  }
  void append(const Tensor& param) {
    register_parameter(std::to_string(params_.size()), param, param.requires_grad());
  }
  /// The value of an item of another ParameterList or of named_parameters().
  void append(const Item& item) { append(item.value()); }
  /// Appends each element of a container of tensors or of items.
  template <class Container>
  void extend(const Container& container) {
    for (const auto& param : container) append(param);
  }
  template <class Container>
  ParameterListImpl& operator+=(const Container& other) {
    extend(other);
    return *this;
  }
  /// The idx-th parameter (an error past the end); assigning to it replaces it.
  Tensor& at(size_t idx) {
    if (idx >= size())
      throw Error("ParameterList: index " + std::to_string(idx) + " is out of range (size " +
                  std::to_string(size()) + ")");
    return params_[idx].second;
  }
  const Tensor& at(size_t idx) const { return const_cast<ParameterListImpl*>(this)->at(idx); }
  Tensor& operator[](size_t idx) { return at(idx); }
  const Tensor& operator[](size_t idx) const { return at(idx); }
  size_t size() const noexcept { return params_.size(); }
  bool is_empty() const noexcept { return params_.empty(); }
  /// Items with key() ("0", "1", ...) and value().
  auto begin() { return params_.begin(); }
  auto end() { return params_.end(); }
  auto begin() const { return params_.begin(); }
  auto end() const { return params_.end(); }
  std::string repr() const override {
    return kiln::detail::parameters_repr("torch::nn::ParameterList", params_);
  }
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    auto fresh = std::make_shared<ParameterListImpl>();
    for (const auto& item : params_) fresh->append(item.value().detach().clone());
    return copied_into(fresh, device);
  }
};
using ParameterList = ModuleHolder<ParameterListImpl>;

/// Parameters by name, in insertion order, each registered under its key.
class ParameterDictImpl : public Module {
 public:
  ParameterDictImpl() : Module("ParameterDict") {}
  explicit ParameterDictImpl(const OrderedDict<std::string, Tensor>& params) : ParameterDictImpl() {
    for (const auto& item : params) insert(item.key(), item.value());
  }
  /// Registers `param` under `key` with its own requires_grad; an error when the
  /// key is taken, empty or holds a '.'.
  Tensor& insert(std::string key, Tensor param) {
    if (key.empty() || key.find('.') != std::string::npos)
      throw Error("ParameterDict: expected a key that is not empty and has no '.', got '" + key +
                  "'");
    if (params_.contains(key))
      throw Error("ParameterDict: parameter '" + key + "' already defined");
    const bool requires_grad = param.requires_grad();
    return register_parameter(std::move(key), std::move(param), requires_grad);
  }
  /// Removes the parameter under `key` (an error naming it when there is none)
  /// and returns it.
  Tensor pop(const std::string& key) {
    Tensor value = params_[key];
    std::erase_if(params_, [&](const auto& item) { return item.key() == key; });
    return value;
  }
  /// Sets each item's key to its value: replaces the parameter there, or
  /// inserts a new one.
  template <class Container>
  void update(const Container& container) {
    for (const auto& item : container) {
      if (Tensor* old = params_.find(item.key()))
        *old = item.value();
      else
        insert(item.key(), item.value());
    }
  }
  void clear() { params_.clear(); }
  bool contains(const std::string& key) const noexcept { return params_.contains(key); }
  std::vector<std::string> keys() const { return params_.keys(); }
  std::vector<Tensor> values() const { return params_.values(); }
  /// The parameter under `key` (an error naming it when there is none).
  Tensor& get(const std::string& key) { return params_[key]; }
  const Tensor& get(const std::string& key) const { return params_[key]; }
  Tensor& operator[](const std::string& key) { return params_[key]; }
  const Tensor& operator[](const std::string& key) const { return params_[key]; }
  size_t size() const noexcept { return params_.size(); }
  bool empty() const noexcept { return params_.empty(); }
  auto begin() { return params_.begin(); }
  auto end() { return params_.end(); }
  auto begin() const { return params_.begin(); }
  auto end() const { return params_.end(); }
  std::string repr() const override {
    return kiln::detail::parameters_repr("torch::nn::ParameterDict", params_);
  }
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    auto fresh = std::make_shared<ParameterDictImpl>();
    for (const auto& item : params_) fresh->insert(item.key(), item.value().detach().clone());
    return copied_into(fresh, device);
  }
};
using ParameterDict = ModuleHolder<ParameterDictImpl>;

}  // namespace kiln::nn
