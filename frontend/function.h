// Custom autograd functions (torch::autograd::Function): a user op whose
// forward and backward are the user's own code. Eagerly, the forward runs
// with gradient recording off and the call is taped as one `custom` node; its
// backward is called by the autodiff pass through the custom-VJP hook.
#pragma once

#include <any>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "frontend/autograd.h"
#include "frontend/tensor.h"

namespace kiln::autograd {

/// A value saved for backward: any copyable value (a std::any), read back with
/// std::any_cast or libtorch's IValue accessors: toDouble() and toInt() take
/// any number type, toTensor() a Tensor.
class IValue : public std::any {
 public:
  using std::any::any;
  IValue() = default;
  bool isTensor() const { return type() == typeid(Tensor); }
  bool isDouble() const { return type() == typeid(double) || type() == typeid(float); }
  bool isInt() const {
    return type() == typeid(int) || type() == typeid(int64_t) || type() == typeid(long long);
  }
  bool isBool() const { return type() == typeid(bool); }
  bool isNone() const { return !has_value(); }
  double toDouble() const { return number<double>("toDouble"); }
  int64_t toInt() const { return number<int64_t>("toInt"); }
  bool toBool() const { return as<bool>("toBool"); }
  Tensor toTensor() const { return as<Tensor>("toTensor"); }
  const std::string& toStringRef() const { return as_ref<std::string>("toStringRef"); }
  std::vector<int64_t> toIntVector() const { return as<std::vector<int64_t>>("toIntVector"); }

 private:
  template <class T>
  const T& as_ref(const char* what) const {
    if (const T* p = std::any_cast<T>(static_cast<const std::any*>(this))) return *p;
    throw Error(std::string("IValue::") + what + "(): the value holds a " + type().name());
  }
  template <class T>
  T as(const char* what) const {
    return as_ref<T>(what);
  }
  template <class T>
  T number(const char* what) const {
    const std::any& a = *this;
    if (auto* p = std::any_cast<double>(&a)) return static_cast<T>(*p);
    if (auto* p = std::any_cast<float>(&a)) return static_cast<T>(*p);
    if (auto* p = std::any_cast<int>(&a)) return static_cast<T>(*p);
    if (auto* p = std::any_cast<long>(&a)) return static_cast<T>(*p);
    if (auto* p = std::any_cast<long long>(&a)) return static_cast<T>(*p);
    if (auto* p = std::any_cast<bool>(&a)) return static_cast<T>(*p);
    if (auto* p = std::any_cast<Scalar>(&a)) return p->to<T>();
    throw Error(std::string("IValue::") + what + "(): the value holds a " + type().name() +
                ", not a number");
  }
};

/// What forward() hands to backward(): saved tensors and any other data.
class Context {
 public:
  void save_for_backward(std::vector<Tensor> tensors) { saved_ = std::move(tensors); }
  const std::vector<Tensor>& get_saved_variables() const { return saved_; }
  /// Arbitrary values for backward (libtorch's ctx->saved_data["key"]).
  std::map<std::string, IValue> saved_data;
  /// libtorch's hints: accepted; Kiln needs neither (an in-place forward on an
  /// input is seen by version counters, and an output without a gradient gets zeros).
  void mark_dirty(const std::vector<Tensor>&) {}
  void mark_non_differentiable(const std::vector<Tensor>&) {}
  void set_materialize_grads(bool) {}

 private:
  std::vector<Tensor> saved_;
};

/// One application of a custom function: its context and its backward.
struct CustomCall {
  int64_t id = 0;
  std::string name;
  Context ctx;
  std::function<std::vector<Tensor>(Context*, std::vector<Tensor>)> backward;
  std::vector<TensorType> input_types;  // of the tensor operands
  /// A backward() without retain_graph went through the call: what it saved
  /// counts as freed.
  bool released = false;
  /// Results no gradient reaches get an undefined tensor in `backward` instead
  /// of zeros (a traced call, which needs to know which results were reached).
  bool undefined_if_unreached = false;
};

namespace detail {
/// Registers a call so graph nodes can refer to it by id; the tape keeps it alive.
/// The registry entry goes with the call's last owner.
std::shared_ptr<CustomCall> new_custom_call(std::string name);
/// Calls registered and still alive (tests: a long run keeps this flat).
size_t live_custom_calls();
/// Runs a custom forward: records one `custom` node for the call.
std::vector<Tensor> finish_custom(const std::shared_ptr<CustomCall>& call,
                                  const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& outputs, SourceLoc loc);

template <class T>
void collect_tensors(std::vector<Tensor>& out, const T& arg) {
  if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) out.push_back(arg);
}
/// A backward's gradients, one per tensor input. libtorch's convention, one per
/// argument of forward (undefined for the others, and trailing undefined ones
/// allowed), is mapped to Kiln's by `is_tensor` (per argument); anything else
/// is returned as it came, for the caller's count check.
std::vector<Tensor> per_tensor_gradients(std::vector<Tensor> grads,
                                         const std::vector<bool>& is_tensor);
}  // namespace detail

/// CRTP base: `struct MySigmoid : Function<MySigmoid> { static Tensor forward(Context*, Tensor);
/// static std::vector<Tensor> backward(Context*, std::vector<Tensor>); };` then
/// `MySigmoid::apply(x)`.
template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto call = detail::new_custom_call(typeid(Derived).name());
    std::vector<bool> is_tensor{std::is_same_v<std::decay_t<Args>, Tensor>...};
    call->backward = [is_tensor](Context* ctx, std::vector<Tensor> grads) {
      return detail::per_tensor_gradients(Derived::backward(ctx, std::move(grads)), is_tensor);
    };
    std::vector<Tensor> inputs;
    (detail::collect_tensors(inputs, args), ...);
    using R = decltype(Derived::forward(&call->ctx, std::forward<Args>(args)...));
    R result = [&] {
      NoGradGuard no_grad;
      return Derived::forward(&call->ctx, std::forward<Args>(args)...);
    }();
    SourceLoc loc = SourceLoc::from(std::source_location::current());
    if constexpr (std::is_same_v<R, Tensor>) {
      return detail::finish_custom(call, inputs, {result}, loc)[0];
    } else {
      return detail::finish_custom(call, inputs, result, loc);
    }
  }
};

}  // namespace kiln::autograd
