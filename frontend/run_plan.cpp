// run_plan (see run_plan.h): tensors in, the plan run, tensors out.
#include "frontend/run_plan.h"

#include "codegen/backend.h"
#include "frontend/device_ops.h"
#include "frontend/tensor_impl.h"
#include "runtime/plan.h"

namespace kiln::detail {

namespace {

// A dense buffer on t's device holding t's elements (t itself when already dense).
std::shared_ptr<TensorImpl> dense_input(const Tensor& t, SourceLoc where) {
  const TensorImpl& i = *t.impl();
  if (is_contiguous(i.type.shape, i.strides)) return t.impl_ptr();
  auto d = make_dense(i.type);
  device_copy(i.view(), *d, where);
  return d;
}

}  // namespace

std::vector<Tensor> run_plan(const Plan& plan, const Graph& g, const std::vector<Tensor>& args,
                             const std::vector<std::shared_ptr<TensorImpl>>& params,
                             const char* kind, const std::string& name, SourceLoc where) {
  std::vector<std::shared_ptr<TensorImpl>> copies;  // dense copies of strided inputs
  PointerScratch<16> argp(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto d = dense_input(args[i], where);
    argp[i] = d->view().data;
    if (d != args[i].impl_ptr()) copies.push_back(std::move(d));
  }
  std::vector<void*> pp(params.size());
  // Each parameter (by its index) still has the type g was traced with.
  for (NodeId id : g.params()) {
    const int64_t index = g[id].attrs.i(AttrKey::index);
    if (index < 0 || size_t(index) >= params.size()) continue;
    const TensorType& traced = g[id].type();
    const TensorType& now = params[size_t(index)]->type;
    if (now != traced)
      throw Error(std::string(kind) + " '" + name + "': a captured tensor changed type from " +
                      traced.str() + " to " + now.str() + " since it was traced",
                  where);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    TensorImpl& p = *params[i];
    if (is_contiguous(p.type.shape, p.strides)) {
      pp[i] = p.view().data;
      continue;
    }
    for (auto& u : g.updates)
      if (u.param == static_cast<int64_t>(i))
        throw Error(std::string(kind) + " '" + name +
                        "' updates a captured tensor that is not contiguous (expected a dense "
                        "tensor; call contiguous() on it before tracing)",
                    where);
    auto d = dense_input(Tensor(params[i]), where);
    pp[i] = d->view().data;
    copies.push_back(std::move(d));
  }
  std::vector<Tensor> outs;
  PointerScratch<16> outp(g.outputs.size());
  outs.reserve(g.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    auto impl = make_dense(g.type(g.outputs[i]));
    outp[i] = impl->view().data;
    outs.emplace_back(std::move(impl));
  }
  {
    TraceSpan call("call", name);
    backend_for(plan.device).execute(plan, argp.data(), pp.data(), outp.data(), nullptr);
  }
  for (auto& u : g.updates) params[static_cast<size_t>(u.param)]->buffer->version++;
  return outs;
}

}  // namespace kiln::detail
