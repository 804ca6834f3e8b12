// Kernel IR -> LLVM IR -> optimised host machine code. Internal to the CPU
// backend (cpu_backend.cpp); no LLVM type appears here.
//
// The emitted function is `void <symbol>(ptr buffers, i64 begin, i64 end)`: it
// loads the buffer pointers from the table and calls an always-inlined body
// whose pointer parameters are `noalias`, `align 64` (when asked) and
// `dereferenceable(bytes)`, which after inlining gives every load and store
// scoped no-alias metadata, so the loop vectoriser needs no runtime checks.
// noalias is valid because the buffers never overlap: the memory planner gives a
// group's outputs buffers before it frees the group's inputs, and arguments are
// only read (two arguments may be one tensor: reads only, still fine). An output
// computed in place of an input (kir::Buffer::alias, a matmul epilogue) is
// stored through the input's own pointer and its table entry is never
// dereferenced, so no two noalias pointers ever reach the same memory.
#pragma once

#include <string>

#include "codegen/kernel_ir.h"
#include "runtime/llvm_jit.h"

namespace kiln {

struct LlvmKernelBinary {
  std::string object;       // ELF object file defining the kernel symbol
  std::string llvm_ir;      // before optimisation (when texts were asked for)
  std::string llvm_ir_opt;  // after the optimisation pipeline
  std::string assembly;     // host assembly
  // Where the time went (milliseconds): building the LLVM IR (with verification),
  // the optimisation pipeline, and machine code emission.
  double irgen_ms = 0, optimize_ms = 0, machine_code_ms = 0;
};

struct LlvmEmitOptions {
  bool want_texts = false;      // fill the IR and assembly texts
  bool assume_aligned = false;  // buffers are 64-byte aligned
  bool want_object = true;      // false: texts only (a disk-cache hit that wants dumps)
  LlvmOpt opt = LlvmOpt::Fast;  // the optimisation pipeline
  /// The quick tier (CodeTier): -O0 machine code, and no IR optimisation
  /// unless the kernel has a floating-point reduction the vectoriser may
  /// split across lanes (reorders_sums): that one keeps `opt`'s pipeline, so both
  /// tiers add its elements in the order the vectoriser chose.
  bool quick = false;
  /// Streaming (non-temporal) stores: an output of at least `stream_min_bytes`
  /// bytes (its size known at compile time; 0: none), or with `stream_all` any
  /// output, whose loop streams_stores admits, is stored past the cache.
  int64_t stream_min_bytes = 0;
  bool stream_all = false;
};

/// Whether the kernel, compiled with `opts`, writes an output with streaming
/// (non-temporal) stores: 8 bytes moved an element of a unary op instead of 12,
/// no read for ownership of the output's lines. An x86 host, and one loop that
/// writes the output once, at `row offset + its index`, from lets and loads at
/// such indices (no reduction, no branch, no inner loop, no sin or cos, no index
/// used as data), and nowhere reads it back: the kernel's flat loop, or its last
/// pass over a row (layer norm's output pass). That loop becomes scalar steps up
/// to the output's first vector-aligned element, a vector loop of the host's
/// width with aligned `!nontemporal` stores, and scalar steps for the rest; an
/// sfence before the kernel returns makes the stores visible to the thread that
/// joins it. The values are the ordinary stores' bit for bit.
bool streams_stores(const kir::Kernel& k, const LlvmEmitOptions& opts);

/// Whether k has a floating-point reduction the optimiser may reassociate (an
/// unordered sum, product, max or min: its adds carry LLVM's `reassoc` flag).
bool reorders_sums(const kir::Kernel& k);

/// Compiles `k` for the host CPU (see LlvmOpt). Throws kiln::Error if LLVM rejects the module.
LlvmKernelBinary compile_kernel_llvm(const kir::Kernel& k, const std::string& symbol,
                                     const LlvmEmitOptions& opts);

}  // namespace kiln
