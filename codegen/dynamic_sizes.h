// The dynamic dimensions of a compiled function's arguments: marked by the
// user, or found when a call changes only sizes. Their kernels take the sizes
// at run time (CompileOptions::dynamic_sizes, codegen/kernel_template.h), so
// that a new size compiles no kernel; a probe at another size before the first
// compile gives that compile its templates already (frontend/jit_dynamic.cpp
// traces it, record_program_kernels in codegen/program.h lowers it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/op.h"

namespace kiln {

/// A dynamic dimension of a function's arguments.
struct DynamicDim {
  size_t arg = 0;     // the parameter's position
  size_t tensor = 0;  // its index among the tensor arguments
  int64_t dim = 0;    // as marked (may be negative) or found
  bool marked = false;
  std::string str() const;  // "arg 0 dim 1"
};

/// What the log says of `d`, a dimension found changing between a call of
/// argument types `was` and one of `now` and made dynamic: "arg 0 dim 1 is now
/// dynamic (64 -> 32): CPU kernels take it at run time; a new size retraces
/// and shares them".
std::string now_dynamic_str(const DynamicDim& d, const std::vector<TensorType>& was,
                            const std::vector<TensorType>& now);

/// The tensor arguments' types and the plain numbers of a call, in order;
/// `is_tensor` per parameter.
struct SizedCall {
  const std::vector<bool>& is_tensor;
  const std::vector<TensorType>& types;
  const std::vector<double>& numbers;
};

/// The dimensions whose sizes differ between a call and an earlier signature
/// (`types`, `numbers`), when nothing else of the tensors' types or the numbers
/// does (else nullopt).
std::optional<std::vector<DynamicDim>> size_changes(const SizedCall& now,
                                                    const std::vector<TensorType>& types,
                                                    const std::vector<double>& numbers);

/// The argument types a probe traces at: each of `dims` one larger than in
/// `types`. Nullopt when a dimension's backend compiles every size (its
/// kernels take no sizes at run time: Backend::sizes_at_run_time).
std::optional<std::vector<TensorType>> probe_types(const std::vector<TensorType>& types,
                                                   const std::vector<DynamicDim>& dims);

/// One function's dynamic dimensions. Not thread-safe: its owner locks.
class DynamicDims {
 public:
  /// Marks dimension `dim` of parameter `arg`; false when it was dynamic already.
  /// Throws kiln::Error when `arg` is not a tensor's position among the function's
  /// parameters (`is_tensor`; `what` names the function: "'f'").
  bool mark(size_t arg, int64_t dim, const std::vector<bool>& is_tensor, const std::string& what);
  /// Throws kiln::Error at `where` when a marked dimension does not fit the call
  /// ("<what>: mark_dynamic(arg 0, dim 2) does not fit this call (arg 0 is f32[3])").
  void fit_marked(const std::vector<bool>& is_tensor, const std::vector<TensorType>& types,
                  const std::string& what, SourceLoc where);
  /// Makes `changes` (size_changes of a call of `types`) dynamic; returns those
  /// that were not yet.
  std::vector<DynamicDim> add(const std::vector<DynamicDim>& changes,
                              const std::vector<TensorType>& types);
  /// Whether every one of `changes` is of a dynamic dimension.
  bool all_dynamic(const std::vector<DynamicDim>& changes,
                   const std::vector<TensorType>& types) const;
  bool empty() const { return dims_.empty(); }
  /// The marked dimensions, on the first call that has any (a probe's): empty after.
  std::vector<DynamicDim> take_probe();

 private:
  bool is_dynamic(size_t arg, int64_t dim, int64_t rank) const;
  std::vector<DynamicDim> dims_;
  bool probed_ = false;
};

}  // namespace kiln
