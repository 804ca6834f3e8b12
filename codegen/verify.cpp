// Plan verification (verify.h): a plan run kernel by kernel against the
// reference kernels, with the tolerance rounding-level changes allow.
#include "codegen/verify.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <sstream>

#include "codegen/backend.h"
#include "runtime/interpreter.h"
#include "runtime/reference.h"

namespace kiln {
namespace {

std::vector<double> as_f64(const View& a) {
  std::vector<double> x(static_cast<size_t>(a.numel()));
  copy_to(a, dense_view(x.data(), DType::f64, a.shape));
  return x;
}

// Reordered floating-point arithmetic (a sum in other blocks, a fused multiply-
// add) computes the exact result of inputs perturbed by a few units in the last
// place per term operation. Its effect on a value is estimated by running the
// reference on inputs multiplied by 1 + r * 2^-16 (f32; 2^-45 for f64: about
// 128 units in the last place, the backward error of summing hundreds of terms
// in another order), r uniform in [-1, 1]: the change is what rounding can do
// to that value. Cancellation (a sum of large terms that is nearly zero) and
// amplification (Adam's m / (sqrt(v) + eps) of a gradient at rounding level)
// give large changes; a value the plan computes differently gives none.
std::vector<HostArray> perturbed(std::span<const HostArray> in, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> r(-1, 1);
  std::vector<HostArray> out;
  for (const HostArray& a : in) {
    if (!a.storage || !is_floating(a.type.dtype)) {
      out.push_back(a);
      continue;
    }
    const double rel = a.type.dtype == DType::f64 ? 0x1p-45 : 0x1p-16;
    std::vector<double> x = as_f64(a.view());
    for (double& v : x) v *= 1 + rel * r(rng);
    out.push_back(HostArray::make(a.type));
    copy_to(dense_view(x.data(), DType::f64, a.type.shape), out.back().view());
  }
  return out;
}

// The reference run on perturbed inputs, or nothing when that run fails (a
// perturbed float that feeds an index can leave its range): then rounding is
// allowed nothing and the difference is reported as it is.
std::optional<std::vector<HostArray>> interpret_perturbed(const Graph& g,
                                                          std::span<const HostArray> args,
                                                          std::span<const HostArray> params) {
  try {
    std::vector<HostArray> moved_params = perturbed(params, 2);
    return interpret(g, perturbed(args, 1), moved_params);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The largest change between two runs of one value (elements where a run gave
// NaN count for nothing).
double max_change(const View& a, const View& b) {
  const std::vector<double> x = as_f64(a), y = as_f64(b);
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]);
    if (!std::isnan(d)) m = std::max(m, d);
  }
  return m;
}

// g computing `values` as its outputs, with no parameter updates.
Graph computing(const Graph& g, const std::vector<Value>& values) {
  Graph probe = g;
  probe.outputs = values;
  probe.updates.clear();
  return probe;
}

// The plan with every intermediate in a buffer of its own, so that none is
// overwritten by the memory plan's reuse before it is compared; a view of
// another slot (a folded reshape) stays on that slot's buffer.
Plan unshared(const Plan& plan) {
  Plan p = plan;
  p.temp_bytes.clear();
  for (PlanSlot& slot : p.slots)
    if (slot.kind == PlanSlot::Temp && slot.view_of < 0) {
      slot.index = static_cast<int64_t>(p.temp_bytes.size());
      p.temp_bytes.push_back(slot.bytes());
    }
  for (PlanSlot& slot : p.slots)
    if (slot.view_of >= 0) slot.index = p.slots[static_cast<size_t>(slot.view_of)].index;
  return p;
}

// Runs the plan unshared on copies of args and params; every slot's buffer is
// kept in `kept` (the outputs' in `outs`) until release_kept.
void run_unshared(const Plan& plan, const Graph& g, std::span<const HostArray> args,
                  std::span<const HostArray> params, KeptBuffers& kept,
                  std::vector<HostArray>& outs) {
  std::vector<void*> argp, pp, outp;
  for (const HostArray& a : args) argp.push_back(a.storage ? a.storage->data() : nullptr);
  std::vector<HostArray> copies;  // the plan's parameter updates go into these
  for (const HostArray& p : params) {
    copies.push_back(HostArray::make(p.type));
    copy_to(p.view(), copies.back().view());
    pp.push_back(copies.back().storage->data());
    kept.owned.push_back(copies.back().storage);
  }
  for (Value v : g.outputs) {
    outs.push_back(HostArray::make(g.type(v)));
    outp.push_back(outs.back().storage->data());
  }
  backend_for(plan.device).execute(unshared(plan), argp.data(), pp.data(), outp.data(), &kept);
}

std::string difference_message(const KernelInfo& info, const std::string& name, const Graph& g,
                               Value v, const HostArray& want, int64_t at, double gv, double wv,
                               double spread) {
  std::ostringstream os;
  os << "KILN_CHECK: kernel " << info.name << " of '" << name << "' (from";
  for (const auto& src : info.sources) os << " " << src;
  os << ") differs from the reference kernels: value %" << v.node << " (" << op_name(g[v.node].op)
     << ", " << want.type.str() << ") element " << at << " is " << gv << ", expected " << wv
     << " (rounding-level changes of the inputs move it by up to " << spread << ")";
  return os.str();
}

}  // namespace

int64_t first_difference(const View& got, const View& want, double spread, double* got_value,
                         double* want_value) {
  const std::vector<double> x = as_f64(got), y = as_f64(want);
  const bool f64 = got.dtype == DType::f64;
  const double rtol = f64 ? 1e-9 : 1e-4, atol = f64 ? 1e-12 : 1e-5;
  for (size_t i = 0; i < x.size(); ++i) {
    const double p = x[i], q = y[i];
    const bool both_nan = std::isnan(p) && std::isnan(q);
    if (!both_nan && !(std::abs(p - q) <= atol + rtol * std::abs(q) + spread) && p != q) {
      if (got_value) *got_value = p;
      if (want_value) *want_value = q;
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

std::vector<double> rounding_spreads(const Graph& g, const std::vector<Value>& values,
                                     std::span<const HostArray> args,
                                     std::span<const HostArray> params) {
  const Graph probe = computing(g, values);
  std::vector<double> spread(values.size(), 0.0);
  const std::optional<std::vector<HostArray>> moved = interpret_perturbed(probe, args, params);
  if (!moved) return spread;
  std::vector<HostArray> p0(params.begin(), params.end());
  const std::vector<HostArray> exact = interpret(probe, args, p0);
  for (size_t k = 0; k < values.size(); ++k)
    spread[k] = max_change((*moved)[k].view(), exact[k].view());
  return spread;
}

void verify_plan(const Plan& plan, const CompileReport& r, std::span<const HostArray> args,
                 std::span<const HostArray> params, const std::string& name) {
  const Graph& g = r.optimized;
  std::vector<Value> step_values;
  for (const auto& vals : r.step_values)
    step_values.insert(step_values.end(), vals.begin(), vals.end());
  const Graph probe = computing(g, step_values);
  std::vector<HostArray> ref_params(params.begin(), params.end());
  const std::vector<HostArray> ref = interpret(probe, args, ref_params);
  // On perturbed inputs, made at the first difference (none when that run failed).
  std::optional<std::vector<HostArray>> ref_moved;
  bool tried_moved = false;

  KeptBuffers kept;
  std::vector<HostArray> outs;  // compared through their slots below: kept until then
  run_unshared(plan, g, args, params, kept, outs);
  size_t k = 0;
  std::string failure;
  for (size_t s = 0; s < r.step_values.size() && failure.empty(); ++s) {
    for (Value v : r.step_values[s]) {
      size_t slot = 0;
      while (slot < r.slot_values.size() && !(r.slot_values[slot] == v)) ++slot;
      const HostArray& want = ref[k++];
      if (slot == r.slot_values.size()) continue;
      View got = dense_view(kept.slot_data[slot], want.type.dtype, want.type.shape);
      double gv = 0, wv = 0;
      if (first_difference(got, want.view(), 0, &gv, &wv) < 0) continue;
      if (!tried_moved) {
        ref_moved = interpret_perturbed(probe, args, params);
        tried_moved = true;
      }
      const double spread = ref_moved ? max_change((*ref_moved)[k - 1].view(), want.view()) : 0;
      const int64_t at = first_difference(got, want.view(), spread, &gv, &wv);
      if (at < 0) continue;
      failure = difference_message(r.kernels[s], name, g, v, want, at, gv, wv, spread);
      break;
    }
  }
  release_kept(kept);
  if (!failure.empty()) throw Error(failure, g[r.step_values.front().front().node].loc);
}

Value value_for(const Graph& g, PlanSource s) {
  if (s.kind == PlanSource::Output && s.index < static_cast<int64_t>(g.outputs.size()))
    return g.outputs[static_cast<size_t>(s.index)];
  if (s.kind == PlanSource::Update)
    for (const ParamUpdate& u : g.updates)
      if (u.param == s.index) return u.value;
  return Value();
}

void RunRecord::add(std::string w, HostArray value, int flag, PlanSource source) {
  what.push_back(std::move(w));
  values.push_back(std::move(value));
  flags.push_back(flag);
  sources.push_back(source);
}

namespace {

// Per entry of `o`, the spread rounding can make in g's value for it (0 for none).
std::vector<double> record_spreads(const Graph& g, const RunRecord& o,
                                   std::span<const HostArray> args,
                                   std::span<const HostArray> params) {
  std::vector<Value> values;
  for (const PlanSource& src : o.sources)
    if (const Value v = value_for(g, src); v.valid()) values.push_back(v);
  const std::vector<double> moved = rounding_spreads(g, values, args, params);
  std::vector<double> spread(o.sources.size(), 0.0);
  for (size_t k = 0, j = 0; k < o.sources.size(); ++k)
    if (value_for(g, o.sources[k]).valid()) spread[k] = moved[j++];
  return spread;
}

}  // namespace

RunDifference first_run_difference(const Graph& g, const RunRecord& traced, const RunRecord& eager,
                                   size_t n, std::span<const HostArray> args,
                                   std::span<const HostArray> params) {
  std::vector<double> spreads;  // made at the first difference
  for (size_t k = 0; k < n; ++k) {
    const HostArray &t = traced.values[k], &w = eager.values[k];
    std::string how;
    if (bool(t.storage) != bool(w.storage)) {
      how = std::string("is ") + (t.storage ? "defined" : "undefined") + " traced but " +
            (w.storage ? "defined" : "undefined") + " eagerly";
    } else if (traced.flags[k] != eager.flags[k]) {
      how = "has " + traced.flags_are + " " + std::to_string(traced.flags[k]) + " traced but " +
            std::to_string(eager.flags[k]) + " eagerly" + traced.flags_legend;
    } else if (t.storage && t.type != w.type) {
      how = "is " + t.type.str() + " traced but " + w.type.str() + " eagerly";
    } else if (t.storage && first_difference(t.view(), w.view(), 0, nullptr, nullptr) >= 0) {
      // Differences that rounding alone can make are no mismatch.
      if (spreads.empty()) spreads = record_spreads(g, traced, args, params);
      double gv = 0, wv = 0;
      if (const int64_t at = first_difference(t.view(), w.view(), spreads[k], &gv, &wv); at >= 0) {
        std::ostringstream os;
        os.precision(9);
        os << "differs at element " << at << ": traced " << gv << ", eager " << wv
           << " (rounding-level changes of the inputs move it by up to " << spreads[k] << ")";
        how = os.str();
      }
    }
    if (!how.empty()) return {static_cast<int64_t>(k), how};
  }
  return {};
}

std::string plan_value_str(const Graph& g, const CompileReport& r, PlanSource s) {
  const Value tv = value_for(g, s);
  if (!tv.valid()) return "";
  std::ostringstream os;
  const Node& n = g[tv.node];
  os << "the traced value is %" << tv.node << " (" << op_name(n.op) << ")";
  if (n.loc.known()) os << " from " << n.loc.str();
  if (const int64_t k = step_computing(r, value_for(r.optimized, s)); k >= 0) {
    os << ", computed by kernel " << r.kernels[size_t(k)].name << " (from";
    for (const auto& src : r.kernels[size_t(k)].sources) os << " " << src;
    os << ")";
  }
  return os.str();
}

void check_runs(const Graph& g, const CompileReport& r, const RunRecord& traced,
                const RunRecord& eager, size_t n, std::span<const HostArray> args,
                std::span<const HostArray> params, const std::string& name, SourceLoc where) {
  const RunDifference d = first_run_difference(g, traced, eager, n, args, params);
  if (d.index < 0) return;
  const PlanSource src = traced.sources[static_cast<size_t>(d.index)];
  const std::string value = plan_value_str(g, r, src);
  const std::string blame =
      value.empty() ? ""
                    : "; " + value +
                          " (every kernel matched the reference kernels, so the traced graph "
                          "itself differs from the eager code: is a value read on the host, or a "
                          "branch taken on data?)";
  const Value v = value_for(g, src);
  throw Error("KILN_CHECK: after a call of '" + name + "', " +
                  traced.what[static_cast<size_t>(d.index)] + " " + d.how + blame,
              v.valid() ? g[v.node].loc : where);
}

int64_t step_computing(const CompileReport& r, Value v) {
  for (size_t k = 0; v.valid() && k < r.step_values.size() && k < r.kernels.size(); ++k)
    if (std::find(r.step_values[k].begin(), r.step_values[k].end(), v) != r.step_values[k].end())
      return static_cast<int64_t>(k);
  return -1;
}

}  // namespace kiln
