// A program as a function: the body that both the eager and the traced runs
// call, and its jit() wrapper for any number of arguments.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frontend/optim.h"
#include "frontend/tensor.h"
#include "ir/graph.h"
#include "tools/fuzz/program.h"

namespace kiln::fuzz {

/// A fresh tensor with the input's values.
Tensor make_input(const Input& in, DType dtype);

/// Runs the instructions on the inputs (arguments from `args`, captured tensors
/// from `caps`, each in program order) and returns the outputs, then the loss.
/// In Mode::backward_inside it calls loss.backward() (and `opt->step()`).
/// With `check`, each result that has values (an eager run) is checked against
/// PyTorch's (oracle.h), and a call that throws is noted.
struct EagerCheck {
  std::string mismatch;  // the first difference from PyTorch
  int threw_at = -1;     // the instruction that threw a kiln::Error
};
std::vector<Tensor> run_body(const Program& p, const std::vector<Tensor>& caps,
                             const std::vector<Tensor>& args, optim::Optimizer* opt,
                             EagerCheck* check = nullptr);

using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// jit() of a body taking `nargs` tensors (0 to 3), with the Traced object's
/// call, graph and save behind one interface.
struct TracedBody {
  Body call;
  std::function<Graph(const std::vector<Tensor>&)> graph;     // as optimized
  std::function<Graph(const std::vector<Tensor>&)> recorded;  // as traced, before the passes
  std::function<void(const std::string&, const std::vector<Tensor>&)> save;
};
TracedBody traced_body(const Body& body, size_t nargs);

}  // namespace kiln::fuzz
