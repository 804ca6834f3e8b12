// Vectorisable math for the CPU backend: exp, log, sin, cos, tanh, sigmoid,
// gelu and pow emitted as straight-line LLVM IR (range reduction by bit
// manipulation, polynomials, selects; no branches, no libm calls), so the
// loop vectoriser widens them like any other arithmetic. Each takes and
// returns a scalar `float` or `double` value; the type picks the polynomial
// degree. Accuracy against correctly rounded results, for arguments in the
// ranges the tests sweep (|x| < 1e4 for sin/cos):
//   f32: exp, log, sin, cos within 2 ulp; tanh, sigmoid within 3 ulp; gelu
//        within 5 ulp where x > -5.6 (below, erfc flushes to 0: |error| < 5e-8);
//        pow is computed in f64 and rounded once (0.5 ulp + 1e-15).
//   f64: exp, log, sin, cos, tanh, sigmoid within 4 ulp; gelu within 8 ulp where
//        x > -8.4 (below, erfc flushes to 0: |error| < 1e-16); pow within |y ln x| * 4 ulp
//        (~1e-13 near overflow). The test suite measures these (cpu_jit_test).
// Internal to codegen/; only the .cpp files that include LLVM use it.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::llvm_math {

llvm::Value* exp(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* log(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* sin(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* cos(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* tanh(llvm::IRBuilderBase& b, llvm::Value* x);
/// 1 / (1 + exp(-x)), as the reference kernel computes it.
llvm::Value* sigmoid(llvm::IRBuilderBase& b, llvm::Value* x);
/// 0.5 x (1 + erf(x / sqrt 2)), as the reference kernel computes it.
llvm::Value* gelu(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* erf(llvm::IRBuilderBase& b, llvm::Value* x);
/// C99 pow, special cases included (pow(x, 0) = 1, pow(1, y) = 1, pow(-8, 1/3) = NaN, ...).
llvm::Value* pow(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);
/// Integer power with wrap-around (exact modulo 2^bits); negative exponents give
/// 0 unless |x| = 1, as the reference kernel. x and y are iN of one width.
llvm::Value* ipow(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);

}  // namespace kiln::llvm_math
