// Every op's eager CUDA kernel generates and compiles with NVRTC: the graph an
// eager op runs on a GPU (eager_op_graph), through the pass pipeline and
// fusion, to CUDA C, to PTX and a cubin. Needs NVRTC, not a GPU.
#include <set>

#include "codegen/cuda_backend.h"
#include "frontend/device_ops.h"
#include "cuda_device_util.h"
#include "passes/pipeline.h"

using namespace kiln;

namespace {

const Device kGpu(kCUDA);

TensorType t(DType dt, Shape s) {
  return TensorType{dt, std::move(s), kGpu};
}

struct OpCase {
  OpKind op;
  std::vector<TensorType> operands;
  Attrs attrs;
  TensorType out;  // creation ops only; others infer it
};

std::vector<OpCase> cases() {
  const DType f32 = DType::f32, f64 = DType::f64, i64 = DType::i64;
  std::vector<OpCase> c;
  const TensorType x = t(f32, {4, 6}), row = t(f32, {6}), b = t(kBool, {4, 6});
  for (OpKind k : all_ops()) {
    OpCategory cat = op_info(k).category;
    if (cat == OpCategory::Unary && k != OpKind::logical_not && k != OpKind::cast) {
      c.push_back({k, {x}, {}, {}});
      c.push_back({k, {t(f64, {3, 5})}, {}, {}});
    }
    if (cat == OpCategory::Binary && k != OpKind::logical_and && k != OpKind::logical_or) {
      c.push_back({k, {x, row}, {}, {}});
      c.push_back({k, {t(i64, {4, 6}), t(i64, {})}, {}, {}});
    }
    if (cat == OpCategory::Reduce && !is_arg_reduction(k)) {
      c.push_back(
          {k, {x}, {{AttrKey::dims, std::vector<int64_t>{1}}, {AttrKey::keepdim, int64_t(0)}}, {}});
      c.push_back({k,
                   {t(f64, {300, 70})},
                   {{AttrKey::dims, std::vector<int64_t>{1}}, {AttrKey::keepdim, int64_t(1)}},
                   {}});
      c.push_back({k,
                   {x},
                   {{AttrKey::dims, std::vector<int64_t>{0, 1}}, {AttrKey::keepdim, int64_t(0)}},
                   {}});
      c.push_back(
          {k, {x}, {{AttrKey::dims, std::vector<int64_t>{0}}, {AttrKey::keepdim, int64_t(0)}}, {}});
    }
  }
  c.push_back({OpKind::logical_not, {b}, {}, {}});
  c.push_back({OpKind::cast, {x}, {{AttrKey::dtype, i64}}, {}});
  c.push_back({OpKind::cast, {b}, {{AttrKey::dtype, f64}}, {}});
  c.push_back({OpKind::logical_and, {b, b}, {}, {}});
  c.push_back({OpKind::logical_or, {b, t(kBool, {6})}, {}, {}});
  c.push_back({OpKind::where, {b, x, t(f32, {})}, {}, {}});
  for (OpKind k : all_ops()) {
    if (!is_arg_reduction(k)) continue;
    c.push_back({k, {x}, {{AttrKey::dim, int64_t(1)}, {AttrKey::keepdim, int64_t(0)}}, {}});
    c.push_back(
        {k, {t(f32, {8, 500})}, {{AttrKey::dim, int64_t(1)}, {AttrKey::keepdim, int64_t(1)}}, {}});
  }
  c.push_back({OpKind::reshape, {x}, {{AttrKey::shape, Shape{6, 4}}}, {}});
  c.push_back({OpKind::expand, {t(f32, {4, 1})}, {{AttrKey::shape, Shape{4, 6}}}, {}});
  c.push_back(
      {OpKind::permute, {t(f32, {2, 3, 4})}, {{AttrKey::perm, std::vector<int64_t>{2, 0, 1}}}, {}});
  c.push_back({OpKind::slice,
               {x},
               {{AttrKey::dim, int64_t(1)},
                {AttrKey::start, int64_t(1)},
                {AttrKey::end, int64_t(5)},
                {AttrKey::step, int64_t(2)}},
               {}});
  c.push_back({OpKind::unfold,
               {x},
               {{AttrKey::dim, int64_t(1)},
                {AttrKey::size, int64_t(3)},
                {AttrKey::step, int64_t(2)},
                {AttrKey::dilation, int64_t(1)}}});
  c.push_back({OpKind::pad,
               {x},
               {{AttrKey::dim, int64_t(1)},
                {AttrKey::low, int64_t(1)},
                {AttrKey::high, int64_t(2)},
                {AttrKey::interior, int64_t(1)}},
               {}});
  c.push_back({OpKind::gather, {x, t(i64, {2, 6})}, {{AttrKey::dim, int64_t(0)}}, {}});
  c.push_back({OpKind::gather, {t(f64, {3, 100}), t(DType::i32, {3, 7})}, {{AttrKey::dim, int64_t(1)}}, {}});
  c.push_back({OpKind::scatter_add, {x, t(i64, {3, 6}), t(f32, {3, 6})}, {{AttrKey::dim, int64_t(0)}}, {}});
  c.push_back({OpKind::scatter_add, {t(f64, {4, 7}), t(i64, {4, 2}), t(f64, {4, 2})}, {{AttrKey::dim, int64_t(1)}}, {}});
  for (OpKind k : all_ops()) {
    if (op_info(k).category != OpCategory::Scan) continue;
    c.push_back({k, {x}, {{AttrKey::dim, int64_t(1)}, {AttrKey::reverse, int64_t(0)}}, {}});
    c.push_back({k, {t(f64, {5, 3, 70})}, {{AttrKey::dim, int64_t(1)}, {AttrKey::reverse, int64_t(1)}}, {}});
  }
  c.push_back({OpKind::cumsum, {t(i64, {4, 6})}, {{AttrKey::dim, int64_t(0)}, {AttrKey::reverse, int64_t(0)}}, {}});
  // Long lines fold in chunks (ir/scan_chunks.h): split_scans' kernels, both directions.
  c.push_back({OpKind::cumsum, {t(f32, {200000})}, {{AttrKey::dim, int64_t(0)}, {AttrKey::reverse, int64_t(1)}}, {}});
  c.push_back({OpKind::logcumsumexp, {t(f64, {2, 70000, 1})}, {{AttrKey::dim, int64_t(1)}, {AttrKey::reverse, int64_t(0)}}, {}});
  // The small integer types: scans into int64, gather and scatter_add in their own.
  c.push_back({OpKind::cumsum, {t(DType::u8, {4, 6})}, {{AttrKey::dim, int64_t(1)}, {AttrKey::reverse, int64_t(0)}}, {}});
  c.push_back({OpKind::cumprod, {t(DType::i8, {4, 6})}, {{AttrKey::dim, int64_t(0)}, {AttrKey::reverse, int64_t(1)}}, {}});
  c.push_back({OpKind::gather, {t(DType::u8, {4, 6}), t(i64, {2, 6})}, {{AttrKey::dim, int64_t(0)}}, {}});
  c.push_back({OpKind::scatter_add, {t(DType::i16, {4, 6}), t(i64, {3, 6}), t(DType::i16, {3, 6})}, {{AttrKey::dim, int64_t(0)}}, {}});
  c.push_back({OpKind::matmul, {x, t(f32, {6, 3})}, {}, {}});
  c.push_back({OpKind::matmul, {t(f64, {2, 4, 6}), t(f64, {6, 3})}, {}, {}});
  c.push_back({OpKind::constant, {}, {{AttrKey::value, 2.5}}, t(f32, {4, 6})});
  c.push_back({OpKind::constant, {}, {{AttrKey::value, 7.0}}, t(i64, {})});
  c.push_back({OpKind::arange, {}, {{AttrKey::start, 1.0}, {AttrKey::step, 0.5}}, t(f32, {9})});
  c.push_back({OpKind::arange, {}, {{AttrKey::start, 0.0}, {AttrKey::step, 1.0}}, t(i64, {9})});
  return c;
}

// Ampere (PTX) and Hopper (PTX and a cubin).
const int kArchs[] = {80, 90};

}  // namespace

TEST_CASE("every eager op's CUDA kernel generates and compiles with NVRTC") {
  if (nvrtc_version().empty()) {
    MESSAGE("skipped: this build has no NVRTC");
    return;
  }
  std::set<OpKind> covered;
  int kernels = 0;
  for (const OpCase& oc : cases()) {
    TensorType out = op_info(oc.op).category == OpCategory::Creation
                         ? oc.out
                         : infer_type(oc.op, oc.operands, oc.attrs);
    Graph g = eager_op_graph(oc.op, oc.attrs, oc.operands, out);
    CAPTURE(g.str());
    CHECK(g.outputs.size() == 1);
    CHECK(g.type(g.outputs[0]) == out);
    Graph opt = optimize_graph(g);
    for (const FusionGroup& grp : plan_fusion(opt)) {
      REQUIRE(grp.kind != GroupKind::Opaque);
      CudaKernelSource src = generate_cuda_kernel(opt, grp);
      if (!src.needs_kernel) {
        CHECK(grp.kind == GroupKind::Matmul);  // a lone matmul: cuBLAS, no kernel
        continue;
      }
      for (int arch : kArchs) {
        CudaBinary bin;
        CHECK_NOTHROW(bin = nvrtc_compile(src.source, src.name, arch, /*want_cubin=*/arch == 90));
        CHECK(bin.ptx.find(".entry " + src.name) != std::string::npos);
        if (arch == 90) CHECK_FALSE(bin.cubin.empty());
      }
      ++kernels;
    }
    covered.insert(oc.op);
  }
  // Every op an eager GPU call can reach is covered: the rest run on the host
  // (literal data, checks, the sort library, collectives, which stage through host
  // memory to the communicator) or never run eagerly (inputs, custom calls,
  // and detach and rebind, which only traces record and remove after autodiff).
  for (OpKind k : all_ops()) {
    bool host = k == OpKind::literal ||
                op_info(k).category == OpCategory::Check || op_info(k).category == OpCategory::Sort ||
                op_info(k).category == OpCategory::Attention ||
                op_info(k).category == OpCategory::Collective;
    bool never = op_info(k).category == OpCategory::Input ||
                 op_info(k).category == OpCategory::Custom || k == OpKind::detach ||
                 k == OpKind::rebind;
    CHECK_MESSAGE((covered.count(k) || host || never), "no eager CUDA case for ", op_name(k));
  }
  MESSAGE(kernels << " eager kernels compiled for sm_80 and sm_90 with NVRTC " << nvrtc_version());
}
