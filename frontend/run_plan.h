// Running a compiled plan on tensors: the one place that packs tensors into the
// buffer pointers a backend's execute takes (codegen/backend.h), for traced
// functions (forward and backward plans), loaded graphs and eager ops on CUDA.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "ir/graph.h"
#include "runtime/plan.h"

namespace kiln::detail {

/// Runs `plan` (compiled from g) on `args`, copied to dense buffers when strided,
/// and `params`, g's parameters by index, read and updated in their own buffers;
/// returns fresh dense outputs of g's output types, and bumps the version of every
/// parameter g updates. A parameter whose type changed since g was traced, or an
/// updated parameter that is not dense, is a kiln::Error naming "<kind> '<name>'"
/// and `where`.
std::vector<Tensor> run_plan(const Plan& plan, const Graph& g, const std::vector<Tensor>& args,
                             const std::vector<std::shared_ptr<TensorImpl>>& params,
                             const char* kind, const std::string& name, SourceLoc where);

}  // namespace kiln::detail
