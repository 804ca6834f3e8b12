// run_plan (see run_plan.h): tensors in, the plan run, tensors out.
#include "frontend/run_plan.h"

#include "codegen/backend.h"
#include "frontend/device_ops.h"
#include "frontend/tensor_impl.h"
#include "runtime/plan.h"

namespace kiln::detail {

std::vector<Tensor> run_plan(const Plan& plan, const Graph& g, const std::vector<Tensor>& args,
                             const std::vector<std::shared_ptr<TensorImpl>>& params,
                             const char* kind, const std::string& name, SourceLoc where) {
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
  for (const ParamUpdate& u : g.updates) {
    const TensorImpl& p = *params[static_cast<size_t>(u.param)];
    if (!is_contiguous(p.type.shape, p.strides))
      throw Error(std::string(kind) + " '" + name +
                      "' updates a captured tensor that is not contiguous (expected a dense "
                      "tensor; call contiguous() on it before tracing)",
                  where);
  }
  // A dense buffer's data for each input: its own, or a copy's (kept until the plan ran).
  std::vector<std::shared_ptr<TensorImpl>> copies;
  auto dense_data = [&](const TensorImpl& t) {
    if (is_contiguous(t.type.shape, t.strides)) return t.view().data;
    copies.push_back(make_dense(t.type));
    device_copy(t.view(), *copies.back(), where);
    return copies.back()->view().data;
  };
  PointerScratch<16> argp(args.size()), pp(params.size());
  for (size_t i = 0; i < args.size(); ++i) argp[i] = dense_data(*args[i].impl());
  for (size_t i = 0; i < params.size(); ++i) pp[i] = dense_data(*params[i]);
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
