// KILN_CHECK: on a new signature, run the body eagerly, put every tensor it
// touched back as it was, run the compiled plan, and compare what both left:
// outputs, gradients, every .grad written, every argument and captured tensor
// (parameters, optimizer state) updated. The plan is also compared kernel by
// kernel with the reference kernels (codegen/verify.h). Errors name the first
// difference, the node and kernel that computed it, and the user's source line.
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "codegen/verify.h"
#include "frontend/autograd.h"
#include "frontend/jit.h"
#include "frontend/jit_entry.h"
#include "frontend/tensor_impl.h"
#include "runtime/reference.h"

namespace kiln::detail {
namespace {

HostArray host_copy(const TensorImpl& t) {
  HostArray h = HostArray::make(t.type);
  copy_to(t.view(), h.view());
  return h;
}

// Host copies of a call's arguments and captured tensors, as they are now.
struct HostInputs {
  std::vector<HostArray> args, params;
  HostInputs(const TracedCore::Entry& e, const TraceArgs& call) {
    for (const Tensor& t : call.tensors) args.push_back(host_copy(*t.impl()));
    for (const auto& p : e.traced.params) params.push_back(host_copy(*p));
  }
};

// A tensor's whole state (data, .grad, history), to be put back after the eager run.
struct KeptTensor {
  std::shared_ptr<TensorImpl> t;
  TensorImpl meta;
  HostArray data;
  uint64_t version = 0, zero_version = 0;
};

// Everything a call can change: the arguments and captured tensors, their
// .grad, and the leaves their eager histories reach (a backward inside the body
// accumulates into those), kept while it lives and put back when it ends.
class KeptState {
 public:
  KeptState(const std::vector<Tensor>& args, const std::vector<std::shared_ptr<TensorImpl>>& params) {
    std::vector<const TapeNode*> roots;
    for (const Tensor& a : args) add(a.impl_ptr(), roots);
    for (const auto& p : params) add(p, roots);
    for (const auto& leaf : history_leaves(roots)) add(leaf, roots);
  }
  ~KeptState() {
    for (const KeptTensor& k : kept_) {
      copy_to(k.data.view(), k.t->view());
      *k.t = k.meta;
      k.t->buffer->version = k.version;
      k.t->buffer->zero_version = k.zero_version;
    }
  }

 private:
  void add(const std::shared_ptr<TensorImpl>& t, std::vector<const TapeNode*>& roots) {
    if (!t || !t->buffer || !seen_.insert(t.get()).second) return;
    kept_.push_back({t, *t, host_copy(*t), t->buffer->version, t->buffer->zero_version});
    if (t->grad) add(t->grad, roots);
    roots.push_back(t->grad_fn.get());
  }
  std::unordered_set<const TensorImpl*> seen_;
  std::vector<KeptTensor> kept_;
};

// What a run left (codegen/verify.h's RunRecord), in a fixed order: outputs,
// then per argument and captured tensor its value and .grad, then gradients
// w.r.t. the call's inputs (none when they could not be taken).
struct Observed : RunRecord {
  Observed() {
    flags_are = "autograd state";  // of outputs, requires_grad
    flags_legend = " (0: no grad, 1: a leaf that requires grad, 2: computed by ops)";
  }
  void add(std::string w, const Tensor& t, int flag = -1, PlanSource src = {}) {
    RunRecord::add(std::move(w), t.defined() ? host_copy(*t.impl()) : HostArray{}, flag, src);
  }
};

// Where the plan computes each argument's and captured tensor's new value and .grad.
struct Sources {
  std::vector<PlanSource> arg, arg_grad, param, param_grad;
};

Sources plan_sources(const TracedCore::Entry& e, size_t n_args) {
  const size_t n_params = e.traced.params.size();
  Sources s{std::vector<PlanSource>(n_args), std::vector<PlanSource>(n_args),
            std::vector<PlanSource>(n_params), std::vector<PlanSource>(n_params)};
  for (const auto& [a, o] : e.traced.arg_writes)
    s.arg[static_cast<size_t>(a)] = {PlanSource::Output, static_cast<int64_t>(o)};
  for (const ParamUpdate& u : e.traced.graph.updates)
    s.param[static_cast<size_t>(u.param)] = {PlanSource::Update, u.param};
  for (const GradWriteback& w : e.traced.grad_writebacks) {
    if (w.kind == GradWriteback::Clear) continue;
    const PlanSource src{PlanSource::Output, static_cast<int64_t>(w.output)};
    if (!w.target.tensor) s.arg_grad[static_cast<size_t>(w.target.arg)] = src;
    for (size_t p = 0; p < n_params; ++p)
      if (e.traced.params[p] == w.target.tensor) s.param_grad[p] = src;
  }
  // A .grad that existed already is a parameter the plan updates in place.
  for (size_t p = 0; p < n_params; ++p)
    for (size_t q = 0; q < n_params; ++q)
      if (e.traced.params[p]->grad == e.traced.params[q]) s.param_grad[p] = s.param[q];
  return s;
}

// Deterministic cotangents for the outputs' gradients.
Tensor cotangent(const Tensor& like, size_t salt) {
  std::vector<double> v(static_cast<size_t>(like.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5 + 0.25 * std::sin(1.7 * double(i) + double(salt));
  return from_vector(v, like.sizes(), TensorOptions(like.dtype()));
}

// Gradients compared for autograd calls: of the outputs that require grad,
// with respect to the call's inputs that the body did not overwrite.
void gradient_targets(const TracedCore::Entry& e, const TraceArgs& args, std::vector<Tensor>* wrt,
                      std::vector<std::string>* names) {
  auto add = [&](const Tensor& t, const std::string& what) {
    if (std::ranges::any_of(e.traced.histories,
                            [&](auto& w) { return w.target.in(args).impl() == t.impl(); }))
      return;  // the body overwrote it
    wrt->push_back(t);
    names->push_back("the gradient w.r.t. " + what);
  };
  for (int64_t a : e.traced.split.wrt_args)
    add(args.tensors[static_cast<size_t>(a)], "argument " + std::to_string(a));
  for (int64_t p : e.traced.split.wrt_params)
    add(Tensor(e.traced.params[static_cast<size_t>(p)]), "captured tensor " + std::to_string(p));
}

}  // namespace

std::vector<Tensor> TracedCore::checked_run(Entry& e, const TraceArgs& args) {
  std::vector<Tensor> wrt;
  std::vector<std::string> wrt_names;
  gradient_targets(e, args, &wrt, &wrt_names);
  const Sources src = plan_sources(e, args.tensors.size());
  // A captured .grad is compared as the .grad of its owner: a plan may write a
  // new gradient into the old gradient's buffer where eager mode makes a new
  // tensor (zero_grad() setting it to none, then backward()).
  std::unordered_set<const TensorImpl*> grad_objects;
  for (const Tensor& a : args.tensors) grad_objects.insert(a.impl()->grad.get());
  for (const auto& p : e.traced.params) grad_objects.insert(p->grad.get());
  auto observe = [&](const std::vector<Tensor>& outs) {
    Observed o;
    for (size_t i = 0; i < outs.size(); ++i)
      o.add("output " + std::to_string(i), outs[i], outs[i].impl()->requires_grad,
            {PlanSource::Output, static_cast<int64_t>(i)});
    for (size_t i = 0; i < args.tensors.size(); ++i) {
      const TensorImpl& t = *args.tensors[i].impl();
      o.add("argument " + std::to_string(i), args.tensors[i], autograd_state(t), src.arg[i]);
      o.add(".grad of argument " + std::to_string(i), t.grad ? Tensor(t.grad) : Tensor(), -1,
            src.arg_grad[i]);
    }
    for (size_t p = 0; p < e.traced.params.size(); ++p) {
      const TensorImpl& t = *e.traced.params[p];
      const std::string name = "captured tensor " + std::to_string(p) + " (" + t.type.str() + ")";
      if (!grad_objects.count(&t))
        o.add(name, Tensor(e.traced.params[p]), autograd_state(t), src.param[p]);
      o.add(".grad of " + name, t.grad ? Tensor(t.grad) : Tensor(), -1, src.param_grad[p]);
    }
    if (!e.traced.autograd_call || wrt.empty()) return o;
    std::vector<Tensor> roots, cots;
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].impl()->requires_grad) {
        roots.push_back(outs[i]);
        cots.push_back(cotangent(outs[i], i));
      }
    if (roots.empty()) return o;
    // A backward inside the body may have freed what these gradients need (the
    // eager run keeps it, so only the plan's backward can fail): then there is
    // nothing to compare, as there would be nothing to differentiate eagerly.
    try {
      std::vector<Tensor> g =
          autograd::grad(roots, wrt, cots, /*retain_graph=*/true, false, /*allow_unused=*/true);
      for (size_t j = 0; j < g.size(); ++j) o.add(wrt_names[j], g[j]);
    } catch (const Error&) {
      // no gradient entries: check_runs compares the state
    }
    return o;
  };

  const HostInputs in(e, args);  // as the call found them, for rounding_spreads (codegen/verify.h)
  Observed eager;
  {
    // What the eager run changes is put back after it (also after a throw).
    const KeptState before(args.tensors, e.traced.params);
    detail::RetainGraphsGuard keep_graphs;  // the compiled run may need what eager backward would free
    eager = observe(body_(args));
  }
  std::vector<Tensor> outs = run(e, args);
  Observed traced = observe(outs);
  // The plan compared kernel by kernel with the reference kernels, on the state the call left.
  const HostInputs left(e, args);
  verify_plan(*e.compiled.plan, *e.compiled.report, left.args, left.params, name_);

  // The state (the same entries both ways), then the gradients if both runs have them.
  check_runs(e.traced.graph, *e.compiled.report, traced, eager,
             std::min(traced.what.size(), eager.what.size()), in.args, in.params, name_, where_);
  return outs;
}

}  // namespace kiln::detail
