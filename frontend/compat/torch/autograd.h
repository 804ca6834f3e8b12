// torch::autograd on Kiln: custom functions (Function, AutogradContext,
// tensor_list, saved_data), grad(), and the grad-mode guards.
#pragma once

#include "torch/functions.h"

namespace torch::autograd {

using kiln::autograd::Function;
using kiln::autograd::IValue;
using AutogradContext = kiln::autograd::Context;
using tensor_list = std::vector<Tensor>;
using variable_list = std::vector<Tensor>;
using Variable = Tensor;
using kiln::NoGradGuard;

/// Gradients of outputs with respect to inputs (not accumulated into .grad()).
/// retain_graph defaults to create_graph, as in libtorch.
inline variable_list grad(const variable_list& outputs, const variable_list& inputs,
                          const variable_list& grad_outputs = {},
                          std::optional<bool> retain_graph = std::nullopt,
                          bool create_graph = false, bool allow_unused = false,
                          kiln::Loc l = kiln::Loc::current()) {
  return kiln::autograd::grad(outputs, inputs, grad_outputs, retain_graph.value_or(create_graph),
                              create_graph, allow_unused, l);
}

/// Accumulates the gradients of `tensors` into the leaves' .grad() (torch::autograd::backward).
inline void backward(const variable_list& tensors, const variable_list& grad_tensors = {},
                     std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                     kiln::Loc l = kiln::Loc::current()) {
  for (size_t i = 0; i < tensors.size(); ++i)
    tensors[i].backward(i < grad_tensors.size() ? grad_tensors[i] : Tensor(),
                        retain_graph.value_or(create_graph) || i + 1 < tensors.size(), create_graph,
                        l);
}

}  // namespace torch::autograd

namespace torch {
using autograd::IValue;
/// Grad mode on or off in its scope (torch::AutoGradMode(false) is a NoGradGuard).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(kiln::grad_mode_enabled()) {
    kiln::set_grad_mode(enabled);
  }
  ~AutoGradMode() { kiln::set_grad_mode(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};
using GradMode = AutoGradMode;
}  // namespace torch

namespace c10 {
/// libtorch's inference mode (c10::InferenceMode guard;): in its scope, when
/// enabled, no gradients are recorded. Kiln has no separate inference tensors:
/// what is made here is an ordinary tensor (libtorch's may not later join
/// autograd; Kiln's may).
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true) : prev_(kiln::grad_mode_enabled()), enabled_(enabled) {
    if (enabled) kiln::set_grad_mode(false);
    depth() += enabled;
  }
  ~InferenceMode() {
    depth() -= enabled_;
    kiln::set_grad_mode(prev_);
  }
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;
  /// Whether an enabled guard is open on this thread.
  static bool is_enabled() { return depth() > 0; }

 private:
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  bool prev_, enabled_;
};
}  // namespace c10
