// The program body and its jit() wrapper (see body.h).
#include "tools/fuzz/body.h"

#include <memory>
#include <utility>

#include "frontend/autograd.h"
#include "frontend/jit.h"
#include "tools/fuzz/instr.h"
#include "tools/fuzz/oracle.h"

namespace kiln::fuzz {

namespace {

template <size_t>
using TensorFor = Tensor;

template <size_t... I>
TracedBody traced_body_of(const Body& body, std::index_sequence<I...>) {
  auto t = jit([body](TensorFor<I>... xs) { return body({xs...}); }, "fuzz");
  TracedBody r;
  r.call = [t](const std::vector<Tensor>& a) { return t(a.at(I)...); };
  r.graph = [t](const std::vector<Tensor>& a) { return t.graph(a.at(I)..., true); };
  r.recorded = [t](const std::vector<Tensor>& a) { return t.graph(a.at(I)..., false); };
  r.save = [t](const std::string& path, const std::vector<Tensor>& a) { t.save(path, a.at(I)...); };
  return r;
}

}  // namespace

Tensor make_input(const Input& in, DType dtype) {
  return from_vector(input_values(in), in.shape,
                     TensorOptions(dtype).requires_grad(in.requires_grad));
}

std::vector<Tensor> run_body(const Program& p, const std::vector<Tensor>& caps,
                             const std::vector<Tensor>& args, optim::Optimizer* opt,
                             EagerCheck* check) {
  std::vector<Tensor> values;
  size_t a = 0, c = 0;
  for (const Input& in : p.inputs) values.push_back(in.captured ? caps.at(c++) : args.at(a++));
  std::vector<std::unique_ptr<NoGradGuard>> guards;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& in = p.instrs[i];
    if (in.op == Op::nograd_begin) {
      guards.push_back(std::make_unique<NoGradGuard>());
    } else if (in.op == Op::nograd_end && !guards.empty()) {
      guards.pop_back();
    }
    const bool marker = in.op == Op::nograd_begin || in.op == Op::nograd_end;
    try {
      values.push_back(marker ? Tensor() : run_instr(in, values));
    } catch (const Error&) {
      if (check) check->threw_at = static_cast<int>(i);
      throw;
    }
    if (check && check->mismatch.empty() && !marker && !values.back().is_symbolic())
      check->mismatch = pytorch_mismatch(in, values.back());
  }
  while (!guards.empty()) guards.pop_back();  // innermost first
  std::vector<Tensor> outs;
  Tensor loss;
  double w = 1;
  for (int o : p.outputs) {
    outs.push_back(values.at(static_cast<size_t>(o)));
    Tensor term = outs.back().sum() * w;
    loss = loss.defined() ? loss + term : term;
    w /= 2;
  }
  if (p.mode == Mode::backward_inside && loss.requires_grad()) {
    loss.backward();
    if (opt) opt->step();
  }
  outs.push_back(loss);
  return outs;
}

TracedBody traced_body(const Body& body, size_t nargs) {
  switch (nargs) {
    case 0:
      return traced_body_of(body, std::make_index_sequence<0>());
    case 1:
      return traced_body_of(body, std::make_index_sequence<1>());
    case 2:
      return traced_body_of(body, std::make_index_sequence<2>());
    default:
      return traced_body_of(body, std::make_index_sequence<3>());
  }
}

}  // namespace kiln::fuzz
