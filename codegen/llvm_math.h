// Vectorisable math for the CPU backend: the op table's math ops (exp, log,
// log2, log10, sin, cos, tanh, sigmoid, gelu, erf, log1p, expm1, rounding, sqrt, rsqrt,
// logaddexp, atan2, hypot) and pow emitted as straight-line LLVM IR (range reduction by bit
// manipulation, polynomials, selects; no branches, no libm calls), so the
// loop vectoriser widens them like any other arithmetic; sin and cos alone are
// calls of module functions with vector variants, whose lanes past |x| = 1e4
// take libm's (one branch a vector). Each takes and returns a `float` or
// `double` value, or (all but sin and cos) a vector of them, lane by lane the
// scalar's bits; the type picks the polynomial degree. Accuracy against
// correctly rounded results, for arguments in the ranges the tests sweep (sin
// and cos: their fast path's up to |x| = 1e4, libm's 0.56 ulp past it):
//   f32: exp, log, sin, cos, log1p, expm1 within 2 ulp; tanh, sigmoid, erf within 3 ulp; gelu
//        within 4.5 ulp where x > -5.6 (below, erfc flushes to 0: |error| < 5e-8);
//        pow, atan2 and hypot are computed in f64 and rounded once (0.5 ulp + 1e-15).
//   f64: exp, log, sin, cos, tanh, sigmoid within 4 ulp (log1p, expm1 2.5); erf within 6 ulp; gelu
//   within 8 ulp where
//        x > -8.4 (below, erfc flushes to 0: |error| < 1e-16); pow within |y ln x| * 4 ulp
//        (~1e-13 near overflow). sqrt is the hardware's (0.5 ulp); rsqrt is 1 / sqrt
//        (1.5 ulp); atan2 within 2 ulp, hypot within 2 ulp. The test suite measures
//        these (cpu_jit_test).
// Internal to codegen/; only the .cpp files that include LLVM use it.
#pragma once

#include "codegen/kernel_ir.h"

namespace llvm {
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace kiln::llvm_math {

/// The scalar math of the op table's math op `op` (ops.def: math(k), e.g. exp,
/// tanh, gelu, atan2) on x (and y, for a binary one), floats or doubles: M::k in
/// llvm_math.cpp, which every math row of the table must have. Sigmoid and gelu
/// are computed as the reference kernels define them: 1 / (1 + exp(-x)) and
/// 0.5 x (1 + erf(x / sqrt 2)).
llvm::Value* math(llvm::IRBuilderBase& b, kir::ScalarOp op, llvm::Value* x,
                  llvm::Value* y = nullptr);
/// exp(x) for an x known to be at most 0 or NaN (softmax's x - max(x)): math's
/// exp without the upper clamp, the same values for every such x.
llvm::Value* exp_nonpositive(llvm::IRBuilderBase& b, llvm::Value* x);
/// sin (cos with `cos`) of x, a float or double or a vector of them, by the
/// reduction and polynomials alone: accurate up to |x| = 1e4, not past it.
llvm::Value* sincos_fast(llvm::IRBuilderBase& b, llvm::Value* x, bool cos);
/// sin or cos of a scalar x for a kernel: a call of the module's kiln.sin.f32
/// (kiln.cos.f64, ...), sincos_fast up to |x| = 1e4 and libm's past it, whose
/// vector variants the loop vectoriser calls (llvm_trig.cpp).
llvm::Value* sin_or_cos(llvm::IRBuilderBase& b, llvm::Value* x, bool cos);
/// After the optimisation pipeline: gives the vector variants of sin and cos that
/// the loop vectoriser called their bodies, inlines them, and drops the rest
/// (llvm_trig.cpp).
void define_vector_variants(llvm::Module& m);
/// Whether math(op) (or pow) is a polynomial expansion of tens of vector
/// operations per element (exp, tanh, erf, ...: bound by arithmetic), not one
/// instruction (sqrt, rsqrt, the rounding ops).
bool expands(kir::ScalarOp op);
/// C99 pow, special cases included (pow(x, 0) = 1, pow(1, y) = 1, pow(-8, 1/3) = NaN, ...).
llvm::Value* pow(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);
/// Integer power with wrap-around (exact modulo 2^bits); negative exponents give
/// 0 unless |x| = 1, as the reference kernel. x and y are iN of one width.
llvm::Value* ipow(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y, bool is_unsigned = false);
/// The op table's philox at (i64 key, i64 counter), bit for bit as the reference
/// kernel: an f32 or f64 in [0, 1), or all 64 bits for i64 (kernel IR's philox).
llvm::Value* philox(llvm::IRBuilderBase& b, llvm::Value* key, llvm::Value* counter, DType t);
/// An i64 uniform in [0, bound) (bound >= 1, unsigned), without bias, bit for bit
/// as the reference kernel (kernel IR's philox_below): a call of a function the
/// module gets on first use.
llvm::Value* philox_below(llvm::IRBuilderBase& b, llvm::Value* key, llvm::Value* counter,
                          llvm::Value* bound);

}  // namespace kiln::llvm_math
