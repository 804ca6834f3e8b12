// compile_cpu_kernel: lower the group, look for its object file in the disk
// cache, compile it with LLVM on a miss, load it into the JIT. The pipeline:
//   lower_group -> print (the cache key's text) -> ObjectCache::load
//     hit:  LlvmJit::load_object                   (no LLVM optimisation or codegen)
//     miss: compile_kernel_llvm -> ObjectCache::store -> LlvmJit::load_object
#include "codegen/cpu_backend.h"

#include <bit>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "codegen/codegen_source_hash.h"
#include "codegen/compile_queue.h"
#include "codegen/kernel_template.h"
#include "codegen/llvm_codegen.h"
#include "codegen/lower.h"
#include "ir/attrs.h"
#include "ir/error.h"
#include "runtime/llvm_jit.h"
#include "runtime/object_cache.h"

namespace kiln {

namespace {

// Bump when the generated code changes meaning or shape, to retire old cache
// entries. The key also carries KILN_CODEGEN_SOURCE_HASH, a hash of the sources
// that turn kernel IR into machine code (llvm_codegen, llvm_math, llvm_jit),
// made at build time: an edit there retires old entries by itself.
constexpr const char* kCodegenVersion = "kiln-cpu-codegen 15";

double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

void take_binary(LlvmKernelBinary bin, KernelArtifacts& a) {
  a.llvm_ir = std::move(bin.llvm_ir);
  a.llvm_ir_opt = std::move(bin.llvm_ir_opt);
  a.assembly = std::move(bin.assembly);
  a.times.irgen_ms = bin.irgen_ms;
  a.times.optimize_ms = bin.optimize_ms;
  a.times.machine_code_ms = bin.machine_code_ms;
}

// Kernels loaded in this process, by cache key: a group whose kernel is
// identical to one already loaded (another group of the plan, or another plan: a
// new batch size leaves the parameter updates unchanged) shares its code instead
// of compiling and loading it again. Entries hold the code weakly, so a kernel is
// still freed when the last plan using it goes.
class LoadedKernels {
 public:
  static LoadedKernels& get() {
    static LoadedKernels* k = new LoadedKernels();  // never destroyed, like the JIT
    return *k;
  }

  // The code of the kernel loaded under `key` in out.fn, out.better and out.code.
  bool find(const std::string& key, CpuKernel& out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    out.code = it->second.code.lock();
    if (!out.code) {
      map_.erase(it);
      return false;
    }
    out.fn = it->second.fn;
    out.better = it->second.better;
    return true;
  }

  void add(const std::string& key, const CpuKernel& k) {
    std::lock_guard<std::mutex> lock(mu_);
    if (++adds_ % 256 == 0)  // forget freed kernels now and then
      std::erase_if(map_, [](const auto& e) { return e.second.code.expired(); });
    map_[key] = Entry{k.fn, k.better, k.code};
  }

 private:
  struct Entry {
    CpuKernelFn fn;
    const std::atomic<CpuKernelFn>* better;
    std::weak_ptr<const void> code;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Entry> map_;
  uint64_t adds_ = 0;
};

// The loop vectoriser cannot vectorise a load indexed by a remainder or quotient
// of the loop variable (a small broadcast dimension: a [4] bias over [N,4] is
// read at i % 4), so such loops stay scalar, and unrolling is what makes a scalar
// loop fast. The fast pipeline gives those kernels LLVM's whole O3
// (bench_compile's BM_KernelSpeed, "[4] bias over [1M,4]").
LlvmOpt pipeline_for(const kir::Kernel& k, LlvmOpt asked) {
  for (const kir::ValueDef& v : k.values)
    if (v.op == kir::ScalarOp::imod || v.op == kir::ScalarOp::idiv) return LlvmOpt::Full;
  return asked;
}

// "; run with p0 = 64, p1 = 0.015625" under a template's kernel IR in the dumps.
std::string params_str(const kir::Kernel& t, const std::vector<int64_t>& p) {
  std::string s = "; run with";
  for (size_t i = 0; i < p.size(); ++i) {
    s += (i ? ", p" : " p") + std::to_string(i) + " = ";
    s += t.params[i] == DType::f64 ? float_str(std::bit_cast<double>(p[i])) : std::to_string(p[i]);
  }
  return p.empty() ? "; no parameters: the code is the same at every size\n" : s + "\n";
}

// A kernel compiled in tiers (CodeTier::Tiered): its quick code, and its
// optimised code once the background compile thread has loaded it. Held by
// CpuKernel::code (so by the plans that run it), better by CpuKernel::better.
struct TieredCode {
  std::atomic<CpuKernelFn> better{nullptr};
  std::shared_ptr<const void> quick, optimised;
};

// The tier a kernel compiled now gets: a compile with no caller waiting (on the
// background thread) or one that keeps texts for dumps gets the optimised code.
CodeTier tier_now(const CpuCompileOptions& opts) {
  if (opts.tier == CodeTier::Tiered && (opts.want_artifacts || on_background_compile_thread()))
    return CodeTier::Optimised;
  return opts.tier;
}

// Posts the optimised compile of kernel k (its quick code in `tiered`) to the
// background compile thread: written to the disk cache, then loaded and stored
// in tiered->better. A plan freed meanwhile needs only the disk cache's copy
// (none without a disk cache: then nothing is compiled). A process that exits
// first leaves it out of the disk cache (the queue drops it at exit).
void post_optimised_compile(const kir::Kernel& k, const std::string& key, const std::string& symbol,
                            LlvmEmitOptions eo, const std::string& cache_dir,
                            const std::shared_ptr<TieredCode>& tiered) {
  eo.quick = false;
  eo.want_texts = false;
  eo.want_object = true;
  post_background_compile(
      [k, key, symbol, eo, cache_dir, weak = std::weak_ptr<TieredCode>(tiered)] {
        const std::shared_ptr<TieredCode> alive = weak.lock();
        if (!alive && cache_dir.empty()) return;
        try {
          LlvmKernelBinary bin = compile_kernel_llvm(k, symbol, eo);
          if (!cache_dir.empty()) ObjectCache(cache_dir).store(key, bin.object);
          if (!alive) return;
          std::shared_ptr<const void> code;
          void* fn = LlvmJit::get().load_object(bin.object, symbol, &code);
          alive->optimised = std::move(code);
          alive->better.store(reinterpret_cast<CpuKernelFn>(fn), std::memory_order_release);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "kiln: kernel %s keeps its quick code: %s\n", k.name.c_str(),
                       e.what());
        }
      },
      CompileUrgency::Improvement);
}

}  // namespace

namespace {

// Where load_code may look for a kernel's code.
enum class Source { Loaded, Anywhere };

// The code of kernel k in out.fn and out.code: an identical kernel's already
// loaded, or (from Anywhere) the object from the disk cache, or compiled now.
// False when no identical kernel is loaded and only those were asked for.
bool load_code(const kir::Kernel& k, const CpuCompileOptions& opts, Source from, CpuKernel& out) {
  LlvmJit& jit = LlvmJit::get();
  const LlvmOpt opt = pipeline_for(k, opts.opt);
  const CodeTier tier = tier_now(opts);
  LlvmEmitOptions eo;
  eo.want_texts = opts.want_artifacts;
  eo.assume_aligned = opts.assume_aligned;
  eo.opt = opt;
  eo.stream_min_bytes = opts.stream_min_bytes;
  eo.stream_all = opts.stream_all;
  const bool streams = streams_stores(k, eo);
  // The key: what the code means (kernel text without names) and what it was built for.
  // The quick tier's own code (KILN_TIER=0) is never on disk; it has a key of its own
  // so that a process loads either tier's code under the right key.
  const std::string key_text =
      std::string(kCodegenVersion) + " " + KILN_CODEGEN_SOURCE_HASH + "\nllvm " +
      LlvmJit::llvm_version() + "\ncpu " + jit.cpu_name() + "\nfeatures " + jit.cpu_features() +
      "\nvector width " + std::to_string(jit.vector_width()) + "\naligned " +
      (opts.assume_aligned ? "1" : "0") + "\nopt " + llvm_opt_name(opt) +
      (tier == CodeTier::Quick ? "\ntier quick" : "") + (streams ? "\nstreaming stores" : "") +
      "\n" + kir::print_kernel(k, {.names = false});
  const std::string key = stable_hash_hex(key_text);
  const std::string symbol = "kiln_kernel_" + key;
  out.artifacts.streaming_stores = streams;

  // Dumps want the texts of a kernel that is not compiled now: regenerate them
  // (the code already loaded, or the object from disk, is what runs).
  auto regenerate_texts = [&] {
    if (!opts.want_artifacts) return;
    eo.want_object = false;
    eo.quick = tier == CodeTier::Quick;
    take_binary(compile_kernel_llvm(k, symbol, eo), out.artifacts);
  };
  if (opts.reuse_loaded && LoadedKernels::get().find(key, out)) {
    out.artifacts.reused = true;
    regenerate_texts();
    return true;
  }
  if (from == Source::Loaded) return false;
  const auto t_load = std::chrono::steady_clock::now();
  const std::string cache_dir = tier == CodeTier::Quick ? "" : opts.cache_dir;
  if (!cache_dir.empty()) {
    const ObjectCache cache(cache_dir);
    if (std::optional<std::string> object = cache.load(key)) {
      // An entry whose header and checksum are right may still hold the wrong
      // object (another kernel's, or garbage): it is damaged like any other.
      try {
        out.fn = reinterpret_cast<CpuKernelFn>(jit.load_object(*object, symbol, &out.code));
        out.artifacts.from_disk_cache = true;
      } catch (const Error& e) {
        cache.discard(key, e.message());
      }
    }
  }
  if (out.artifacts.from_disk_cache) {
    out.artifacts.times.load_ms = ms_between(t_load, std::chrono::steady_clock::now());
    regenerate_texts();
  }
  if (!out.artifacts.from_disk_cache) {
    eo.quick = tier != CodeTier::Optimised;
    LlvmKernelBinary bin = compile_kernel_llvm(k, symbol, eo);
    std::string object = std::move(bin.object);
    take_binary(std::move(bin), out.artifacts);
    if (!eo.quick && !cache_dir.empty()) ObjectCache(cache_dir).store(key, object);
    const auto t = std::chrono::steady_clock::now();
    out.fn = reinterpret_cast<CpuKernelFn>(jit.load_object(object, symbol, &out.code));
    out.artifacts.times.load_ms = ms_between(t, std::chrono::steady_clock::now());
    out.artifacts.quick = eo.quick;
    if (tier == CodeTier::Tiered) {
      auto tiered = std::make_shared<TieredCode>();
      tiered->quick = std::move(out.code);
      out.better = &tiered->better;
      out.code = tiered;
      post_optimised_compile(k, key, symbol, eo, cache_dir, tiered);
    }
  }
  if (opts.reuse_loaded) LoadedKernels::get().add(key, out);
  return true;
}

// With dynamic sizes: the kernel compiled for these sizes when it is loaded
// already (a parameter update, the same at every batch size), else a template's
// code run with this kernel's constants. The disk cache is not asked first: a
// kernel found there for one size would leave the next size without a template.
bool load_template_code(const kir::Kernel& k, const std::string& skeleton,
                        const CpuCompileOptions& opts, CpuKernel& out) {
  if (load_code(k, opts, Source::Loaded, out)) return true;
  std::optional<kir::Kernel> t = opts.templates->find_or_make(skeleton, k, &out.params);
  if (!t) return false;
  t->name = k.name;
  load_code(*t, opts, Source::Anywhere, out);
  out.artifacts.templated = true;
  if (opts.want_artifacts)
    out.artifacts.kernel_ir = kir::print_kernel(*t) + params_str(*t, out.params);
  return true;
}

}  // namespace

CpuLoweredGroup lower_cpu_group(const Graph& g, const FusionGroup& group,
                                const CpuCompileOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  LowerOptions lo;
  lo.epilogue_in_place = opts.epilogue_in_place;
  lo.column_reductions = true;
  CpuLoweredGroup l;
  l.loc = first_loc(g, group);
  try {
    l.kernel = lower_group(g, group, lo);
  } catch (Error& e) {
    e.attach(l.loc);
    throw;
  }
  CpuKernel& out = l.kernel_out;
  out.artifacts.times.lower_ms = ms_between(t0, std::chrono::steady_clock::now());
  out.artifacts.compile_ms = out.artifacts.times.lower_ms;
  out.info = describe_kernel(g, group, l.kernel);
  l.kernel.name = out.info.name;
  for (const kir::Buffer& b : l.kernel.buffers) {
    out.buffers.push_back(b.value);
    l.has_output = l.has_output || b.output;
  }
  return l;
}

namespace {

// Runs `body` (which loads the code of l's kernel into l.kernel_out), adding its
// time to the kernel's and naming the group's source line in an error. The
// kernel IR for dumps is the kernel's as it is now (its in-place outputs
// stored), unless body prints a template's instead.
template <class Body>
CpuKernel finish_group(CpuLoweredGroup& l, const CpuCompileOptions& opts, Body body) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opts.want_artifacts) l.kernel_out.artifacts.kernel_ir = kir::print_kernel(l.kernel);
  if (l.has_output) {  // else a lone matmul: BLAS does all of it
    try {
      body();
    } catch (Error& e) {
      e.attach(l.loc);
      throw;
    }
  }
  l.kernel_out.artifacts.compile_ms += ms_between(t0, std::chrono::steady_clock::now());
  return std::move(l.kernel_out);
}

}  // namespace

CpuKernel compile_cpu_group(CpuLoweredGroup l, const CpuCompileOptions& opts) {
  return finish_group(l, opts, [&] {
    const kir::Kernel& k = l.kernel;
    CpuKernel& out = l.kernel_out;
    if (!opts.templates) {
      KILN_CHECK(!opts.dynamic_sizes && !opts.record_only,
                 "internal: dynamic sizes need a kernel-template cache");
      load_code(k, opts, Source::Anywhere, out);
      return;
    }
    const std::string skeleton = kir::skeleton(k);
    if (opts.record_only || !opts.dynamic_sizes || !load_template_code(k, skeleton, opts, out)) {
      opts.templates->remember(skeleton, k);
      if (!opts.record_only) load_code(k, opts, Source::Anywhere, out);
    }
  });
}

CpuKernel compile_cpu_group_as(CpuLoweredGroup l, const kir::Kernel& templ,
                               std::vector<int64_t> params, const CpuCompileOptions& opts) {
  KILN_CHECK(!opts.dynamic_sizes && !opts.record_only,
             "internal: a plan's family template with dynamic sizes");
  return finish_group(l, opts, [&] {
    if (opts.templates)  // a later size may widen it
      opts.templates->remember(kir::skeleton(l.kernel), l.kernel);
    kir::Kernel t = templ;
    t.name = l.kernel.name;
    CpuKernel& out = l.kernel_out;
    load_code(t, opts, Source::Anywhere, out);
    out.artifacts.templated = true;
    out.params = std::move(params);
    if (opts.want_artifacts)
      out.artifacts.kernel_ir = kir::print_kernel(t) + params_str(t, out.params);
  });
}

CpuKernel share_cpu_code(CpuLoweredGroup l, const CpuKernel& compiled, const kir::Kernel& templ,
                         std::vector<int64_t> params, const CpuCompileOptions& opts) {
  return finish_group(l, opts, [&] {
    CpuKernel& out = l.kernel_out;
    out.fn = compiled.fn;
    out.better = compiled.better;
    out.code = compiled.code;
    out.params = std::move(params);
    out.artifacts.templated = true;
    out.artifacts.reused = true;
    if (opts.want_artifacts) {  // the same code as the kernel compiled for it
      kir::Kernel t = templ;
      t.name = l.kernel.name;
      out.artifacts.kernel_ir = kir::print_kernel(t) + params_str(t, out.params);
      out.artifacts.llvm_ir = compiled.artifacts.llvm_ir;
      out.artifacts.llvm_ir_opt = compiled.artifacts.llvm_ir_opt;
      out.artifacts.assembly = compiled.artifacts.assembly;
    }
  });
}

CpuKernel compile_cpu_kernel(const Graph& g, const FusionGroup& group,
                             const CpuCompileOptions& opts) {
  return compile_cpu_group(lower_cpu_group(g, group, opts), opts);
}

CpuKernel compile_lowered_kernel(const kir::Kernel& k, const CpuCompileOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  CpuKernel out;
  if (opts.want_artifacts) out.artifacts.kernel_ir = kir::print_kernel(k);
  load_code(k, opts, Source::Anywhere, out);
  out.artifacts.compile_ms = ms_between(t0, std::chrono::steady_clock::now());
  return out;
}

std::string cpu_target_description() {
  return LlvmJit::get().target_description();
}

}  // namespace kiln
