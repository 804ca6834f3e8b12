// compile_cpu_kernel: lower the group, look for its object file in the disk
// cache, compile it with LLVM on a miss, load it into the JIT. The pipeline:
//   lower_group -> print (the cache key's text) -> ObjectCache::load
//     hit:  LlvmJit::load_object                   (no LLVM optimisation or codegen)
//     miss: compile_kernel_llvm -> ObjectCache::store -> LlvmJit::load_object
#include "codegen/cpu_backend.h"

#include <chrono>

#include "codegen/llvm_codegen.h"
#include "codegen/lower.h"
#include "ir/error.h"
#include "runtime/llvm_jit.h"
#include "runtime/object_cache.h"

namespace kiln {

namespace {

// Bump when the generated code changes meaning or shape, to retire old cache entries.
constexpr const char* kCodegenVersion = "kiln-cpu-codegen 1";

SourceLoc first_loc(const Graph& g, const FusionGroup& group) {
  for (NodeId id : group.nodes)
    if (g.node(id).loc.known()) return g.node(id).loc;
  return {};
}

}  // namespace

CpuKernel compile_cpu_kernel(const Graph& g, const FusionGroup& group,
                             const CpuCompileOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  LowerOptions lo;
  lo.epilogue_in_place = opts.epilogue_in_place;
  lo.in_place = opts.in_place;
  kir::Kernel k = lower_group(g, group, lo);

  CpuKernel out;
  out.info = describe_kernel(g, group, k);
  k.name = out.info.name;
  for (const kir::Buffer& b : k.buffers) out.buffers.push_back(b.value);
  if (opts.want_artifacts) out.artifacts.kernel_ir = kir::print_kernel(k);
  bool has_output = false;
  for (const kir::Buffer& b : k.buffers) has_output = has_output || b.output;
  auto finish = [&] {
    out.artifacts.compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
  };
  if (!has_output) return finish();  // a lone matmul: BLAS does all of it

  try {
    LlvmJit& jit = LlvmJit::get();
    // The key: what the code means (kernel text without names) and what it was built for.
    const std::string key_text =
        std::string(kCodegenVersion) + "\nllvm " + LlvmJit::llvm_version() + "\ncpu " +
        jit.cpu_name() + "\nfeatures " + jit.cpu_features() + "\naligned " +
        (opts.assume_aligned ? "1" : "0") + "\n" + kir::print_kernel(k, {.names = false});
    const std::string key = stable_hash_hex(key_text);
    const std::string symbol = "kiln_kernel_" + key;
    LlvmEmitOptions eo;
    eo.want_texts = opts.want_artifacts;
    eo.assume_aligned = opts.assume_aligned;

    std::optional<std::string> object;
    if (!opts.cache_dir.empty()) object = ObjectCache(opts.cache_dir).load(key);
    if (object) {
      out.artifacts.from_disk_cache = true;
      if (opts.want_artifacts) {
        // Dumps want the texts: regenerate them (the object from disk is what runs).
        eo.want_object = false;
        LlvmKernelBinary texts = compile_kernel_llvm(k, symbol, eo);
        out.artifacts.llvm_ir = std::move(texts.llvm_ir);
        out.artifacts.llvm_ir_opt = std::move(texts.llvm_ir_opt);
        out.artifacts.assembly = std::move(texts.assembly);
      }
    } else {
      LlvmKernelBinary bin = compile_kernel_llvm(k, symbol, eo);
      object = std::move(bin.object);
      out.artifacts.llvm_ir = std::move(bin.llvm_ir);
      out.artifacts.llvm_ir_opt = std::move(bin.llvm_ir_opt);
      out.artifacts.assembly = std::move(bin.assembly);
      if (!opts.cache_dir.empty()) ObjectCache(opts.cache_dir).store(key, *object);
    }
    out.fn = reinterpret_cast<CpuKernelFn>(jit.load_object(*object, symbol, &out.code));
  } catch (Error& e) {
    e.attach(first_loc(g, group));
    throw;
  }
  return finish();
}

std::string cpu_target_description() {
  return LlvmJit::get().target_description();
}

}  // namespace kiln
