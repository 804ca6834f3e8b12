// The conformance matrix (DESIGN.md, "The contract"): every op of the table and
// the composites users build from them, as cases of one table, run in every
// execution mode, dtype and backend, and compared with the reference kernels
// (eager CPU mode runs them) and with central finite differences in f64.
//
// A case is a function of up to three tensors. Each mode computes
//   out = fn(inputs);  loss = (out * r).sum() * c
// with r a fixed random weight of out's shape and c a captured scalar that
// requires grad, so every input gradient and the gradient of a captured tensor
// are non-trivial. Which ops a case exercises is read off its traced graph
// (forward and backward), so the coverage test cannot be fooled by a claim.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln::conformance {

/// How an input tensor is laid out: dense, or a non-contiguous view of a leaf.
enum class Layout { Dense, Transposed, Strided, Expanded };

/// What an input holds.
enum class Kind { Float, Index };

struct Input {
  Shape shape;
  double lo = -1, hi = 1;  // uniform range; Index: integers in [lo, hi)
  Kind kind = Kind::Float;
  Layout layout = Layout::Dense;
  std::vector<double> values;  // explicit values (ties, exact zeros) instead of random ones
};

struct Case {
  std::string name;
  std::vector<Input> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  /// False where the function has kinks or ties at its inputs: there the
  /// convention tests (regression_test.cpp) say what the gradient is.
  bool finite_differences = true;
  double f32_tol = 1e-4;
};

/// The case table.
const std::vector<Case>& cases();

/// The ops no case can cover, each with the reason.
const std::vector<std::pair<OpKind, std::string>>& uncovered_ops();

/// Fresh tensors for one run of a case: the leaves that receive gradients,
/// and the (possibly non-contiguous) views the function is given.
struct Inputs {
  std::vector<Tensor> leaves;  // undefined for inputs that are not float
  std::vector<Tensor> views;
};

/// Inputs of `c` in `dt` on `device`, drawn from `seed` (the same seed gives the same values).
Inputs make_inputs(const Case& c, DType dt, Device device, uint64_t seed);

/// The loss weight r for an output of type `t` (fixed per case and shape).
Tensor loss_weight(const Shape& shape, DType dt, Device device);

/// Everything one run produces: outputs and gradients, copied to the host as f64.
struct Result {
  std::vector<double> out, loss;
  Shape out_shape;
  std::vector<std::vector<double>> grads;  // per input leaf; empty when undefined
  std::vector<bool> grad_defined;
  std::vector<double> c_grad;  // the captured scalar's gradient
  bool c_grad_defined = false;
  int64_t kernels_templated = 0;  // traced modes: kernels run as templates (DynamicMarked)
};

/// The execution modes of the matrix.
enum class Mode {
  Eager,                // every op runs at once (the reference kernels on the CPU)
  TracedEagerBackward,  // traced forward called from eager code; backward() outside
  BackwardInside,       // backward() inside the trace: grads of arguments and captured tensors
  CachedSecondCall,     // the plan of BackwardInside, called again with new values
  Unfused,              // BackwardInside with fusion off (one kernel per op)
  DynamicMarked,        // BackwardInside with dim 0 of each argument marked dynamic:
                        // CPU kernels run as templates where the body traces at another size
  EagerKernels,         // Eager with compiled kernels for expensive elementwise ops at every
                        // size (codegen/eager_kernel.h; by default only for large tensors)
};
const char* mode_name(Mode m);

/// Runs case `c` in mode `m` with inputs from `seed`. CachedSecondCall makes
/// three calls (arguments from seeds seed+2000, seed+1000, seed; captured
/// tensors fixed, so their gradients accumulate) and reports the last; Eager
/// makes the calls of `calls_like`, so it is the reference for any mode.
Result run_case(const Case& c, Mode m, DType dt, Device device, uint64_t seed,
                Mode calls_like = Mode::Eager);

/// The traced graph (forward and backward inside) of a case, unoptimized or after the pipeline.
Graph traced_graph(const Case& c, DType dt, bool optimized, uint64_t seed);

/// Central finite differences (f64, eager) of the loss with respect to each float input leaf.
std::vector<std::vector<double>> finite_difference_grads(const Case& c, uint64_t seed);

/// Compares two results; `what` names the comparison in failure messages.
void check_same(const Result& got, const Result& want, double rtol, double atol,
                const std::string& what);

}  // namespace kiln::conformance
