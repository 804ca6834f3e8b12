// Eager CPU kernels (eager_kernel.h): the op's graph at two lengths, lowered,
// generalised into a template with no parameters, compiled once and cached.
#include "codegen/eager_kernel.h"

#include <map>
#include <mutex>
#include <string>

#include "codegen/kernel_template.h"
#include "codegen/lower.h"
#include "ir/builder.h"
#include "ir/error.h"

namespace kiln {
namespace {

// The op over operands of length n, lowered as the traced path lowers a lone op.
kir::Kernel lower_at(OpKind k, const Attrs& attrs, const std::vector<DType>& in, DType out,
                     int64_t n, KernelInfo* info) {
  Graph g;
  Builder b(g);
  FusionGroup group;
  for (size_t i = 0; i < in.size(); ++i)
    group.inputs.push_back(b.arg(int64_t(i), TensorType{in[i], {n}, Device(kCPU)}));
  const Value v = b.op(k, group.inputs, attrs);
  KILN_CHECK(g.type(v).dtype == out && g.node(v.node).op == k, "internal: eager ", op_name(k),
             " on ", dtype_name(in.at(0)), " gives ", dtype_name(g.type(v).dtype), ", not ",
             dtype_name(out));
  g.outputs.push_back(v);
  group.kind = GroupKind::Elementwise;
  group.nodes = {v.node};
  group.outputs = {v};
  kir::Kernel kernel = lower_group(g, group);
  if (info) *info = describe_kernel(g, group, kernel);
  return kernel;
}

struct Cache {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const EagerKernel>> kernels;  // null: compiling failed
  int64_t failed = 0;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: kernels may run at exit
  return *c;
}

std::shared_ptr<const EagerKernel> compile(OpKind k, const Attrs& attrs, const std::vector<DType>& in,
                                           DType out, const CpuCompileOptions& opts) {
  // Two lengths that share no factor: whatever depends on the length becomes a parameter.
  KernelInfo info;
  const kir::Kernel a = lower_at(k, attrs, in, out, 4096, &info);
  const kir::Kernel b = lower_at(k, attrs, in, out, 4099, nullptr);
  kir::Kernel t = kir::generalize(a, b);
  KILN_CHECK(t.params.empty(), "internal: the eager kernel of ", op_name(k),
             " depends on its length");
  t.name = "eager_" + std::string(op_name(k));
  CpuCompileOptions o = opts;
  o.tier = CodeTier::Optimised;  // compiled once per op and dtypes, run by every later call
  CpuKernel compiled = compile_lowered_kernel(t, o);
  auto e = std::make_shared<EagerKernel>();
  e->fn = compiled.fn;
  e->code = std::move(compiled.code);
  e->grain = info.grain;
  e->streams = compiled.artifacts.streaming_stores;
  return e;
}

}  // namespace

std::shared_ptr<const EagerKernel> eager_cpu_kernel(OpKind k, const Attrs& attrs,
                                                    const std::vector<DType>& in, DType out,
                                                    const CpuCompileOptions& opts) {
  if (!is_elementwise(k) || int(in.size()) != op_info(k).arity)
    throw Error(std::string("eager kernels are for elementwise ops; ") + op_name(k) + " is not one");
  std::string key = std::string(op_name(k)) + " " + attrs_str(attrs) + " ->" + dtype_name(out);
  for (DType t : in) key += std::string(" ") + dtype_name(t);
  key += std::string(" opt ") + llvm_opt_name(opts.opt);
  if (opts.stream_all) key += " streaming stores";
  Cache& c = cache();
  // One lock for lookups and compiles: compiles are rare (one per op, dtypes and
  // pipeline), and a second thread wanting the same kernel must wait for it anyway.
  std::lock_guard<std::mutex> lock(c.mu);
  if (auto it = c.kernels.find(key); it != c.kernels.end()) return it->second;  // null: failed
  try {
    return c.kernels.emplace(key, compile(k, attrs, in, out, opts)).first->second;
  } catch (const Error&) {
    c.kernels.emplace(key, nullptr);
    c.failed++;
    throw;
  }
}

int64_t eager_cpu_kernels_compiled() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return int64_t(c.kernels.size()) - c.failed;
}

}  // namespace kiln
