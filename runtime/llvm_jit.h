// The process-wide LLVM JIT for CPU kernels: the host target (CPU name and
// features), the optimisation pipelines for it, machine code emission (object files and
// assembly text) and an ORC LLJIT that loads object files and hands back
// kernel addresses. Compiling to an object ourselves (instead of letting the
// JIT compile IR) gives the on-disk cache the exact bytes that run, and a
// cache hit loads them with no LLVM optimisation or codegen at all.
//
// LLVM types are only forward-declared here; the implementation is the one
// runtime file that includes LLVM (DESIGN.md, "Layers").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace llvm {
class Module;
}  // namespace llvm

namespace kiln {

/// Which optimisation pipeline kernels get.
///   Fast: a short pipeline for Kiln's loop nests (llvm_jit.cpp, kFastPipeline):
///         inlining, one cleanup, loop rotation and LICM, induction variables, the
///         loop vectoriser with its interleaving, a cleanup of the vector code. No
///         loop unrolling and no SLP vectorisation. Half of O3's optimisation time
///         for kernels that run as fast (bench_compile: BM_FirstCall, BM_KernelSpeed).
///   Full: LLVM's O3 as clang runs it (KILN_OPT=full).
/// Code generation is LLVM's at -O3 for both, without loop strength reduction
/// (a quarter of the machine-code time, for no measured speed).
///   None: no IR optimisation at all (the entry point calls the body): the quick
///         tier of a kernel whose results do not depend on the optimiser (CodeTier,
///         codegen/llvm_codegen.h: LlvmEmitOptions::quick).
enum class LlvmOpt { Fast, Full, None };
const char* llvm_opt_name(LlvmOpt o);  // "fast", "full", "none"

/// Which code a CPU kernel compiled while its caller waits runs (KILN_TIER):
///   Tiered (the default): first the quick tier (LLVM's machine code at -O0, FastISel, and no IR
///           optimisation where that gives the same results), loaded at once; the
///           optimised code is compiled on the background compile thread, written to
///           the disk cache and swapped in when ready. The two tiers compute the
///           same bits (tests/codegen/tier_test.cpp), so no result depends on when the
///           swap happens. A kernel found in the disk cache is the optimised one.
///   Quick: the quick tier only, never swapped, the disk cache neither read nor
///          written (KILN_TIER=0: to test the quick tier's code on its own).
///   Optimised: the optimised code only, compiled before the call goes on (KILN_TIER=1).
enum class CodeTier { Tiered, Quick, Optimised };
const char* code_tier_name(CodeTier t);  // "tiered", "0", "1"

/// The host's last-level cache in bytes (one cache's: Linux's
/// /sys/devices/system/cpu/cpu0/cache, else the C library's; 32 MiB when neither
/// says): the size
/// past which an output streams (frontend/settings.h: stream_min_bytes).
int64_t host_last_level_cache_bytes();

class LlvmJit {
 public:
  /// The JIT, created (and LLVM's native target initialised) on first use. Thread-safe.
  static LlvmJit& get();

  /// Host CPU name as LLVM spells it ("znver3").
  const std::string& cpu_name() const;
  /// Host features as a sorted "+avx2,+fma,-avx512f,..." string (what the code may use).
  const std::string& cpu_features() const;
  /// The vector width kernels bound by arithmetic are compiled for, in bits
  /// (their functions' "prefer-vector-width"; llvm_codegen.cpp decides which
  /// kernels): 512 on a host with AVX-512 (avx512f and evex512), where LLVM's
  /// tuning for most Intel cores prefers 256 and the math kernels ran a third
  /// faster with 512 (bench_jit: BM_Unary); else 0, LLVM's own choice for the
  /// CPU (256 on AVX2 hosts such as Zen 3).
  int vector_width() const;
  /// "znver3, AVX2, 256-bit vectors +avx,+avx2,+fma,...": the CPU, its widest vector
  /// ISA and the width kernels get, then only the enabled features, for dumps and
  /// benchmarks; "rocketlake, AVX-512, 512-bit vectors +avx,..." when vector_width() chose.
  std::string target_description() const;
  /// "19.1.7".
  static const char* llvm_version();

  /// Sets the module's target triple and data layout to the host's.
  void configure(llvm::Module& m) const;
  /// Runs the optimisation pipeline `opt` for the host CPU. Thread-safe: modules in different
  /// contexts may be optimised and emitted concurrently.
  void optimize(llvm::Module& m, LlvmOpt opt) const;
  /// Host machine code for the module as an ELF object file. Consumes nothing.
  /// `quick`: LLVM's -O0 code generator (FastISel, the fast register allocator):
  /// a fraction of the time, the same operations in the same order.
  std::string emit_object(llvm::Module& m, bool quick = false) const;
  /// Host assembly text for a clone of the module, from the same code
  /// generator as emit_object with the same `quick`.
  std::string emit_assembly(const llvm::Module& m, bool quick = false) const;

  /// Loads an object file into a JITDylib of its own and returns the address of
  /// `symbol` in it, with the handle that owns the code: when the last copy of
  /// `code` goes, the JITDylib and its memory are freed (a plan holds the handles
  /// of its kernels, so evicted plans free their code). The same object may be
  /// loaded more than once. Thread-safe.
  /// Throws kiln::Error if the object cannot be linked or lacks the symbol.
  void* load_object(std::string_view object, const std::string& symbol,
                    std::shared_ptr<const void>* code);
  /// Kernels loaded and not yet freed (for tests of the JIT's memory).
  size_t loaded_objects() const;
  /// Target machines made so far: each optimisation or emission borrows one
  /// not in use and gives it back, so this is the most compiles that ran at
  /// once, not the number of compiles (for tests).
  size_t target_machines() const;

  LlvmJit(const LlvmJit&) = delete;
  LlvmJit& operator=(const LlvmJit&) = delete;
  ~LlvmJit();

 private:
  LlvmJit();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
