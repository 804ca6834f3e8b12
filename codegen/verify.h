// Plan verification (KILN_CHECK): a compiled plan run kernel by kernel and
// compared with the reference kernels (runtime/reference.h), and the
// rounding-level tolerance that comparison and the frontend's eager-vs-traced
// comparison (frontend/check.cpp) share.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "codegen/compile.h"
#include "runtime/interpreter.h"

namespace kiln {

/// Index of the first element where `got` and `want` differ by more than
/// atol + rtol * |want| + `spread`, or -1 (NaN equals NaN). The tolerances are
/// the dtype's: a few hundred units in the last place. At a difference,
/// *got_value and *want_value (when given) are the two elements.
int64_t first_difference(const View& got, const View& want, double spread, double* got_value,
                         double* want_value);

/// Per value of g, how far rounding-level changes of the inputs (each element
/// multiplied by 1 + r * 2^-16, 2^-45 for f64, r uniform in [-1, 1]) move it:
/// what reordered arithmetic can do to that value. All zero when the run on the
/// changed inputs fails (a float that feeds an index can leave its range).
std::vector<double> rounding_spreads(const Graph& g, const std::vector<Value>& values,
                                     std::span<const HostArray> args,
                                     std::span<const HostArray> params);

/// Runs `plan`, a CPU plan compiled from report.optimized (with its step and
/// slot values), on copies of `args` and `params` (by index), every
/// intermediate in a buffer of its own, and compares what each kernel wrote
/// with the reference kernels run on the same inputs. Throws kiln::Error at the
/// first value a kernel computes differently beyond rounding ("KILN_CHECK:
/// kernel <k> of '<name>' (from <lines>) differs ..."), naming its node's line.
void verify_plan(const Plan& plan, const CompileReport& report, std::span<const HostArray> args,
                 std::span<const HostArray> params, const std::string& name);

/// The plan step (an index into report.kernels) that computes value v of
/// report.optimized, or -1.
int64_t step_computing(const CompileReport& report, Value v);

}  // namespace kiln
