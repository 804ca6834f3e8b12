// Kiln's switches, read once from the environment; the API setters override.
//   KILN_JIT=0         run traced functions eagerly (debugging)
//   KILN_FUSION=0      one kernel per op (the unfused baseline)
//   KILN_OVERLAP=0     collectives do not overlap computation (the baseline of the overlap)
//   KILN_CHECK=1       on each new signature, also run eagerly and compare
//   KILN_DUMP=dir      write dumps of every compiled function under dir
//   KILN_LOG=a,b       log categories to stderr: recompiles, compile, profile, distributed, all
//                      (profile: per-step totals at exit, and a trace-event file
//                      kiln-profile-<pid>.json in KILN_DUMP's directory or the current one)
//   KILN_CACHE_DIR=d   on-disk kernel cache ("off" disables)
//   KILN_OPT=full      CPU kernels get LLVM's whole O3 (default "fast": a short pipeline
//                      for Kiln's loop nests; runtime/llvm_jit.h)
//   KILN_TIER=1        CPU kernels compiled while a call waits get the optimised code only
//                      (by default, "tiered", they run a quick tier first and the optimised
//                      code is swapped in when the background compile thread has it;
//                      0: the quick tier only; runtime/llvm_jit.h)
//   KILN_REUSE=0       never share an identical kernel already loaded (the cold-compile baseline)
//   KILN_SHARE_SIZES=0 kernels of one plan that differ only in sizes and constants each
//                      compile their own code (by default they share a template)
//   KILN_MERGE_STEPS=0 a matmul's epilogue runs as a step after its BLAS call (by default
//                      on each block of rows as BLAS writes it), and each Adam update as a
//                      step of its own (by default one foreach step for all parameters)
//   KILN_DYNAMIC=0     a size that changes stays static: every size compiles its kernels
//                      (dimensions marked with mark_dynamic stay dynamic)
//   KILN_BACKGROUND=0  a new size of a dynamic dimension compiles before the call returns
//                      (by default the call runs eagerly while it compiles in the background)
//   KILN_CONV=direct   traced CPU conv2d as a fused sum over the window (im2col: always a
//                      GEMM; default auto: by shape, frontend/nn_conv.cpp)
//   KILN_EAGER_KERNELS=0  eager CPU ops all run the reference kernels (by default an
//                      expensive elementwise op on large dense operands runs a compiled kernel)
//   KILN_WARM_UP=0     LLVM's start-up waits for the first compile (by default the
//                      first traced call starts it on another thread while its body traces)
//   KILN_NT_STORES=0   CPU kernels write every output with ordinary stores (by default an
//                      output at least as large as the last-level cache, written once,
//                      streams past the cache: codegen/llvm_codegen.h, streams_stores)
#pragma once

#include <string>

#include "runtime/llvm_jit.h"

namespace kiln {

enum class ConvAlgo { Auto, Im2col, Direct };

struct Settings {
  bool jit = true;
  bool fusion = true;
  bool overlap = true;  // KILN_OVERLAP=0: collectives start only where they are waited for
  bool check = false;
  std::string dump_dir;
  std::string log;
  std::string cache_dir;
  LlvmOpt llvm_opt = LlvmOpt::Fast;
  /// Which code a CPU kernel compiled while a call waits runs first (runtime/llvm_jit.h:
  /// CodeTier): by default the quick tier, then the optimised code compiled in the
  /// background (KILN_TIER=tiered); KILN_TIER=1 the optimised code only; KILN_TIER=0
  /// the quick tier only.
  CodeTier tier = CodeTier::Tiered;
  bool reuse_kernels = true;
  bool share_sizes = true;  // KILN_SHARE_SIZES=0: kernels differing only in sizes compile apart
  /// KILN_MERGE_STEPS=0: a matmul's epilogue and each Adam update run as steps of
  /// their own (CpuOptions::merge_steps).
  bool merge_steps = true;
  bool auto_dynamic = true;  // KILN_DYNAMIC=0: a changing size does not become dynamic
  /// A CPU call at a new size of a dynamic dimension traces, then runs the body
  /// eagerly while its plan compiles on a background thread; calls after that
  /// run the plan. KILN_BACKGROUND=0 compiles before the call returns.
  bool background_compile = true;
  /// How many calls at a new size of a dynamic dimension run the body eagerly,
  /// untraced, before that size compiles (KILN_COMPILE_AFTER, 0-1000): a size that
  /// comes once (a ragged last batch, one evaluation batch) costs one eager call
  /// and no trace or compile; one that comes again compiles as background_compile
  /// says. 0 compiles every new size at its first call. Only calls that would run
  /// eagerly while compiling anyway wait so (not a first call, not CUDA's).
  int compile_after = 1;
  /// How a traced CPU conv2d computes (frontend/nn_conv.cpp): im2col and a GEMM, a
  /// direct fused sum over the window, or (auto) the one measured faster for its
  /// shape. KILN_CONV=im2col|direct|auto.
  ConvAlgo conv = ConvAlgo::Auto;
  /// Eager CPU ops that are expensive and elementwise (exp, tanh, div, ...) on dense
  /// operands of one shape with at least `eager_kernel_min_elements` elements run a
  /// compiled, vectorised kernel (codegen/eager_kernel.h) instead of the reference
  /// kernel, and an eager Adam, AdamW or SGD step updates its dense float parameters in one
  /// multi-tensor pass (frontend/optim_fused.h). KILN_EAGER_KERNELS=0 turns this off:
  /// op by op on the reference kernels, the oracle.
  bool eager_kernels = true;
  /// The first traced call starts the host compiler's one-time start-up (LLVM's)
  /// on another thread while its body traces (codegen/compile.h: CompilerWarmUp).
  /// KILN_WARM_UP=0 turns this off.
  bool warm_up = true;
  int64_t eager_kernel_min_elements = int64_t{1} << 15;
  /// CPU kernels (traced, and eager ops' compiled kernels) write an output of at
  /// least this many bytes with streaming (non-temporal) stores where its loop
  /// allows (codegen/llvm_codegen.h: streams_stores): no read of the output's
  /// lines before they are written, so a third less memory traffic for a unary
  /// op. The default is the host's last-level cache (an output that large is out
  /// of cache by the time anything reads it); smaller outputs keep ordinary
  /// stores, which leave them in cache for the next op. KILN_NT_STORES=0: 0, never.
  int64_t stream_min_bytes = 0;
};

struct CompileOptions;

/// The process-wide settings (initialised from the environment on first use).
Settings& settings();
/// True when KILN_LOG names the category (or "all").
bool log_enabled(const char* category);
/// Writes the profile's trace (every event recorded so far, runtime/profile.h) to
/// kiln-profile-<pid>.json in KILN_DUMP's directory, or the current one; returns
/// the line saying where it went (or why it was not written). KILN_LOG=profile
/// calls it at exit.
std::string write_profile_trace();
/// Compile options as the switches set them (fusion, overlap, disk cache, LLVM
/// pipeline); every caller of compile_graph starts from these.
CompileOptions compile_options();

}  // namespace kiln
