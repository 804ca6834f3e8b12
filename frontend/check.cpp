// KILN_CHECK: on a new signature, compare the compiled plan kernel by kernel
// with the reference interpreter, and its outputs with eager execution; the
// error names the first kernel whose output differs and its source lines.
#include <cmath>
#include <sstream>

#include "codegen/compile.h"
#include "frontend/autograd.h"
#include "frontend/jit.h"
#include "frontend/jit_entry.h"
#include "frontend/tensor_impl.h"
#include "runtime/interpreter.h"
#include "runtime/reference.h"

namespace kiln::detail {
namespace {

HostArray host_copy(const TensorImpl& t) {
  HostArray h = HostArray::make(t.type);
  copy_to(t.view(), h.view());
  return h;
}

// Index of the first element where a and b differ beyond tolerance, or -1.
int64_t first_difference(const View& a, const View& b, double* got, double* want) {
  int64_t n = a.numel();
  std::vector<double> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  copy_to(a, dense_view(x.data(), DType::f64, a.shape));
  copy_to(b, dense_view(y.data(), DType::f64, b.shape));
  double rtol = a.dtype == DType::f64 ? 1e-9 : 1e-4, atol = a.dtype == DType::f64 ? 1e-12 : 1e-5;
  for (int64_t i = 0; i < n; ++i) {
    double p = x[static_cast<size_t>(i)], q = y[static_cast<size_t>(i)];
    bool both_nan = std::isnan(p) && std::isnan(q);
    if (!both_nan && !(std::abs(p - q) <= atol + rtol * std::abs(q)) && p != q) {
      *got = p;
      *want = q;
      return i;
    }
  }
  return -1;
}

}  // namespace

void TracedCore::check(Entry& e, const TraceArgs& args, const std::vector<Tensor>& outs) {
  const CompileReport& r = *e.report;
  const Graph& g = r.optimized;

  std::vector<HostArray> hargs;
  for (const Tensor& t : args.tensors) hargs.push_back(host_copy(*t.impl()));
  // The eager call below would apply parameter updates; both runs here use copies.
  std::vector<HostArray> ref_params, plan_params;
  for (auto& p : e.params) {
    ref_params.push_back(host_copy(*p));
    plan_params.push_back(host_copy(*p));
  }

  Graph probe = g;
  probe.outputs.clear();
  probe.updates.clear();
  for (const auto& vals : r.step_values)
    for (Value v : vals) probe.outputs.push_back(v);
  std::vector<HostArray> ref = interpret(probe, hargs, ref_params);

  std::vector<void*> argp, paramp, outp;
  for (auto& h : hargs) argp.push_back(h.storage->data());
  for (auto& h : plan_params) paramp.push_back(h.storage->data());
  std::vector<HostArray> plan_outs;
  for (Value v : g.outputs) plan_outs.push_back(HostArray::make(g.type(v)));
  for (auto& h : plan_outs) outp.push_back(h.storage->data());
  // Every intermediate gets a buffer of its own, so none is overwritten by the
  // memory plan's reuse before it is compared.
  Plan unshared = *e.plan;
  unshared.temp_bytes.clear();
  for (PlanSlot& slot : unshared.slots)
    if (slot.kind == PlanSlot::Temp) {
      slot.index = static_cast<int64_t>(unshared.temp_bytes.size());
      unshared.temp_bytes.push_back(slot.bytes());
    }
  KeptBuffers kept;
  execute_plan(unshared, argp.data(), paramp.data(), outp.data(), &kept);

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
      int64_t at = first_difference(got, want.view(), &gv, &wv);
      if (at < 0) continue;
      const KernelInfo& info = r.kernels[s];
      std::ostringstream os;
      os << "KILN_CHECK: kernel " << info.name << " of '" << name_ << "' (from";
      for (const auto& src : info.sources) os << " " << src;
      os << ") differs from the reference kernels: value %" << v.node << " ("
         << op_name(g[v.node].op) << ", " << want.type.str() << ") element " << at << " is " << gv
         << ", expected " << wv;
      failure = os.str();
      break;
    }
  }
  release_kept(kept);
  if (!failure.empty()) throw Error(failure, g[r.step_values.front().front().node].loc);

  if (e.has_updates) return;
  std::vector<Tensor> eager;
  {
    NoGradGuard no_grad;
    eager = body_(args);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    double gv = 0, wv = 0;
    int64_t at = first_difference(outs[i].impl()->view(), eager[i].impl()->view(), &gv, &wv);
    if (at >= 0)
      throw Error("KILN_CHECK: output " + std::to_string(i) + " of '" + name_ +
                      "' differs from eager execution at element " + std::to_string(at) + ": " +
                      std::to_string(gv) + " vs " + std::to_string(wv) +
                      " (every kernel matched the reference, so the traced graph itself differs "
                      "from the eager code: is a value read or a branch taken on data?)",
                  where_);
  }
}

}  // namespace kiln::detail
