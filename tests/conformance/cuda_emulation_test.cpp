// The conformance matrix on the CUDA backend without a GPU: every case's traced
// graph (forward and backward inside the trace, after the pass pipeline) is cut
// into fusion groups, fused and unfused; each group's generated CUDA C is
// compiled by NVRTC and, for the host, run under emulation, and compared with
// the reference kernels' values of the same graph.
#include "conformance.h"
#include "cuda/cuda_test_util.h"
#include "frontend/tensor_impl.h"

using namespace kiln;
using namespace kiln::conformance;
using kiln::test::Buf;

namespace {

// The case traced with every input (and the loss scale) as an argument, so the
// graph's arguments are the dense inputs. Its only parameters are the random
// generator's key and offset (cases that draw), both 0 after manual_seed(0).
Graph all_argument_graph(const Case& c, DType dt, std::vector<Buf>* args) {
  manual_seed(0);
  Inputs in = make_inputs(c, dt, Device(), 7);
  Tensor scale = full({}, 1.5, TensorOptions(dt)).requires_grad_();
  std::vector<Tensor> call = in.views;
  while (call.size() < 3) call.push_back(zeros({}, TensorOptions(dt)));
  call.push_back(scale);
  auto f = jit([&c](Tensor a, Tensor b, Tensor d, Tensor s) -> std::vector<Tensor> {
    std::vector<Tensor> v = {a, b, d};
    v.resize(c.inputs.size());
    Tensor o = c.fn(v);
    Tensor l = (o.to(s.dtype()) * loss_weight(o.sizes(), s.dtype(), Device())).sum() * s;
    l.backward();
    return {o, l};
  });
  for (const Tensor& t : call) {
    Tensor dense = t.detach().contiguous();
    Buf b = kiln::test::make_buf(TensorType{dense.dtype(), dense.sizes(), Device()});
    std::memcpy(b.data(), dense.impl()->view().data,
                size_t(dense.numel()) * dtype_size(dense.dtype()));
    args->push_back(b);
  }
  return f.graph(call[0], call[1], call[2], call[3]);
}

void check_cases_on_cuda(DType dt) {
  kiln::test::CudaBatch batch;
  int kernels = 0;
  for (const Case& c : cases()) {
    std::vector<Buf> args;
    auto g = std::make_shared<const Graph>(all_argument_graph(c, dt, &args));
    std::vector<Buf> generator;  // key and offset: int64 zeros
    for (NodeId p : g->params()) {
      REQUIRE(g->node(p).type() == TensorType{DType::i64, {}, Device()});
      generator.push_back(kiln::test::make_buf(g->node(p).type()));
      std::memset(generator.back().data(), 0, sizeof(int64_t));
    }
    const std::vector<Buf> vals = kiln::test::reference_eval(*g, args, generator);
    const double tol = dt == kFloat64 ? 1e-9 : 2e-4;
    for (bool fused : {true, false}) {
      FusionOptions fo;
      fo.enabled = fused;
      for (const FusionGroup& grp : plan_fusion(*g, fo)) {
        if (grp.kind == GroupKind::Opaque) continue;
        const std::string label = c.name + " [" + dtype_name(dt) +
                                  (fused ? ", fused] " : ", unfused] ") +
                                  group_kind_name(grp.kind) + "\n" + g->str();
        kernels += batch.add(g, grp, vals, kiln::test::Tolerance{tol, tol}, label).needs_kernel;
      }
    }
  }
  CHECK(kernels > 100);
  batch.run();
}

}  // namespace

TEST_CASE("every conformance case's kernels, CUDA C under host emulation (f32)") {
  check_cases_on_cuda(kFloat32);
}

TEST_CASE("every conformance case's kernels, CUDA C under host emulation (f64)") {
  check_cases_on_cuda(kFloat64);
}
