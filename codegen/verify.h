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

/// Where a plan computes a value a run left: its graph's output `index`, or
/// the update of parameter `index` (None: it computes none).
struct PlanSource {
  enum Kind : uint8_t { None, Output, Update } kind = None;
  int64_t index = 0;
};

/// g's value for `s`, or an invalid Value (None, or one g does not have).
Value value_for(const Graph& g, PlanSource s);

/// What one run of a call left, in a fixed order that two runs of it share
/// (KILN_CHECK's eager run and compiled run): per entry what it is ("output
/// 0"), its value (no storage: undefined), a flag compared as it is, and
/// where the plan computes it.
struct RunRecord {
  std::vector<std::string> what;
  std::vector<HostArray> values;
  std::vector<int> flags;
  std::vector<PlanSource> sources;
  /// What the flags are, for messages: "has <flags_are> 1 traced but 2 eagerly<flags_legend>".
  std::string flags_are = "flag", flags_legend;
  void add(std::string w, HostArray value, int flag = -1, PlanSource source = {});
};

/// The first of the first `n` entries in which a run of the plan compiled from
/// `g` (`traced`) and another run (`eager`) differ: defined or not, flag,
/// type, or elements further apart than first_difference allows with the
/// spread that rounding-level changes of the inputs (`args`, `params`, as the
/// call found them: rounding_spreads) make in g's value for the entry.
struct RunDifference {
  int64_t index = -1;  // -1: none
  std::string how;     // "differs at element 3: traced 1.5, eager 1.25 (rounding-level ...)"
};
RunDifference first_run_difference(const Graph& g, const RunRecord& traced, const RunRecord& eager,
                                   size_t n, std::span<const HostArray> args,
                                   std::span<const HostArray> params);

/// "the traced value is %12 (mul) from f.cpp:10, computed by kernel k3 (from
/// f.cpp:10)": g's value for `s` and the step of the plan compiled from g
/// (report `r`) that computes it; "" when g has none.
std::string plan_value_str(const Graph& g, const CompileReport& r, PlanSource s);

/// KILN_CHECK's verdict on two runs of a call (first_run_difference's arguments;
/// `r`: the report of the plan compiled from g): throws kiln::Error at their
/// first difference ("KILN_CHECK: after a call of '<name>', <what> <how>; <the
/// traced value and its kernel> (every kernel matched ...)"), at the source line
/// of g's value for it, else at `where`.
void check_runs(const Graph& g, const CompileReport& r, const RunRecord& traced,
                const RunRecord& eager, size_t n, std::span<const HostArray> args,
                std::span<const HostArray> params, const std::string& name, SourceLoc where);

}  // namespace kiln
