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

/// What forward() hands to backward(): saved tensors and any other data.
class Context {
 public:
  void save_for_backward(std::vector<Tensor> tensors) { saved_ = std::move(tensors); }
  const std::vector<Tensor>& get_saved_variables() const { return saved_; }
  /// Arbitrary values for backward (libtorch's ctx->saved_data["key"]).
  std::map<std::string, std::any> saved_data;

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
}  // namespace detail

/// CRTP base: `struct MySigmoid : Function<MySigmoid> { static Tensor forward(Context*, Tensor);
/// static std::vector<Tensor> backward(Context*, std::vector<Tensor>); };` then
/// `MySigmoid::apply(x)`.
template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto call = detail::new_custom_call(typeid(Derived).name());
    call->backward = [](Context* ctx, std::vector<Tensor> grads) {
      return Derived::backward(ctx, std::move(grads));
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
