// Vectorisable transcendental functions as LLVM IR (see llvm_math.h).
//
// exp:  n = rint(x / ln2), r = x - n ln2 (Cody-Waite, two constants), n from
//       one magic-number addition (reduce_ln2_magic), e^r by a polynomial, times
//       2^n built in the exponent bits in two halves from that sum's bits (so
//       results that overflow or underflow gradually are right). Where 2^n fits
//       one exponent field (expm1, sigmoid, tanh, erf, gelu), the sum's bits
//       shifted are 2^n itself.
// log:  x = m 2^e with m in [sqrt(1/2), sqrt(2)) (split in integer arithmetic);
//       log m = 2 atanh(s), s = (m-1)/(m+1), 2s taken as f - f s (f = m - 1);
//       subnormals are scaled first. Summed as e k_hi + ((e k_lo + 2s) + 2s q),
//       so that only two multiply-adds wait on the division's result.
//       log1p: f of the exact 1 + x from u = 1 + x's exponent alone,
//       4f = fma(x, 2^(2-e), 2^(2-e) - 4).
// expm1: exp's reduction, 2^n (e^r - 1) + (2^n - 1) with an e^r - 1 polynomial.
// sigmoid: 1 / (1 + e^-x), e^-x without exp's gradual underflow.
// sin, cos: n = rint(x 2/pi), r = x - n pi/2 (Cody-Waite: in f64 4 constants, the
//       first short enough that n * c is exact; in f32 3 full-width ones where
//       the target fuses multiply-adds, else 4 short ones), polynomials on
//       [-pi/4, pi/4], and the quadrant n mod 4, n's low bits as an integer,
//       picks sin/cos and the sign; past |x| = 1e4, libm's (llvm_trig.cpp).
// tanh: u / (2 - u) with u = -expm1(-2|x|), x's sign or-ed in (a NaN passes
//       the clamp of |x|); expm1 is exp's reduction with an e^r - 1 polynomial,
//       exact at n = 0 for small |x|.
// erf:  f64: a + a (P(a^2) - 1) below 1/2; 1 - exp(-x^2) g(x) above, g a Chebyshev
//       fit of erfc(x) exp(x^2) on [1/2, 3] and [3, 6], coefficients generated
//       with mpmath at 50 digits. f32: 1 - exp(-q) over the whole range, q =
//       -log(erfc(a)) a polynomial in a, exp's reduction taken of q.
// gelu: 0.5 x (1 + erf(x/sqrt 2)) with 1 + erf(-a) taken as erfc(a) = exp(-a^2) g(a),
//       so the negative side has no cancellation (the reference kernel's formula
//       loses digits there; results agree to its accuracy). In f32, 1 + erf(a) is
//       2 - erfc(a), also without cancellation, so one rational fit of erfc(a)
//       exp(a^2) over [0, 4] serves both sides (no erf polynomial, and an exp
//       whose argument is never positive): a third fewer operations.
// pow:  exp(y log|x|) in double, with the C99 special cases and signs.
// f64 polynomials are Taylor's (coefficients 1/k!: a term or two longer than
// minimax fits, and obviously right); f32's are minimax fits, a term or two
// shorter, that codegen/math_fits.py regenerates (mpmath).
#include "codegen/llvm_math.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/error.h"

namespace kiln::llvm_math {
namespace {

using llvm::Intrinsic::ID;

// Taylor coefficients 1/k! for k = hi, hi-step, ..., lo (highest degree first);
// with `alternate`, the sign of sin's and cos's series: negative where k/2 is odd.
std::vector<double> taylor(int hi, int lo, int step = 1, bool alternate = false) {
  std::vector<double> c;
  for (int k = hi; k >= lo; k -= step) {
    double f = 1;
    for (int i = 2; i <= k; ++i) f *= i;
    double v = 1 / f;
    if (alternate && (k / 2) % 2 == 1) v = -v;
    c.push_back(v);
  }
  return c;
}

// q = -log(erfc(a)) = a + a A(a) on [0, 3.92] (f32 erf = 1 - e^-q), A of degree 8
// in a, fitted with q's relative error weighted by erfc(a) q / erf(a), which
// makes it erf's (erf moves by erfc(a) times q's error): 4e-9, codegen/math_fits.py.
const std::vector<double> kErfLogErfc32 = {
    -9.256437274247308e-06, 0.00011764272410811755,  -0.0006328417209725037,
    0.0016670357434084072,  -0.00016040368201532916, -0.019153060198411412,
    0.1027778296482556,     0.6366193820393186,      0.1283791716104834};
// erf(x)/x as a polynomial in u = x^2 on [0, 1] (f64).
const std::vector<double> kErfSmall64 = {
    9.428596956834164e-09,  -1.5188281247335167e-07, 1.631035651387174e-06, -1.4913300906316395e-05,
    0.00012054681918310599, -0.0008548304871782741,  0.005223977154105304,  -0.026866170586496874,
    0.11283791670580423,    -0.376126389031744,      1.1283791670955121};
// erfc(x) exp(x^2) on [lo, hi] as a polynomial in t = (2x - lo - hi) / (hi - lo);
// relative errors 1.7e-18 ([1/2, 3]) and 3e-18 ([3, 6]); f64 only.
const std::vector<double> kErfcx64_05_3 = {
    1.355765323918686e-11,  -4.940669293058982e-11,  9.268326040227135e-11,
    -3.187162898960864e-10, 1.309037855317925e-09,   -4.412254545497559e-09,
    1.4238350313340063e-08, -4.6131178211601365e-08, 1.4690057601922569e-07,
    -4.571860861927127e-07, 1.391997126466972e-06,   -4.142946974163862e-06,
    1.2036356698124286e-05, -3.4085695028798914e-05, 9.393955857672874e-05,
    -0.0002514969929286404, 0.0006527023820821659,   -0.0016380946804171106,
    0.003964250650191233,   -0.009219282993833662,   0.020518357439767848,
    -0.04347655320583715,   0.08713067201107386,     -0.1637204318931065,
    0.2849722347374364};
const std::vector<double> kErfcx64_3_6 = {
    9.298269402514383e-13,   -3.855602478028782e-12,  1.0945550360903806e-11,
    -4.405936483816362e-11,  1.8636935637488512e-10,  -7.357171528471107e-10,
    2.8570511492547087e-09,  -1.1012273176206117e-08, 4.1934986514687315e-08,
    -1.5762571887276165e-07, 5.846992603125327e-07,   -2.1394019967389742e-06,
    7.717539021887589e-06,   -2.7431421831294042e-05, 9.60143346271528e-05,
    -0.0003307141043979527,  0.0011201614260534323,   -0.0037279443941659234,
    0.012179532227877552,    -0.03902389294640972,    0.12248480427384142};

// erfc(a) exp(a^2) on [0, 4] as P(a) / Q(a), degree 4 over 4 (relative error
// 1.3e-8), fitted by iterated weighted least squares at 6000 Chebyshev nodes
// against mpmath at 30 digits; f32 gelu only.
const std::vector<double> kErfcxP32 = {1.129853299164374e-05, 0.06208395499709049,
                                       0.36600944035978134, 0.8688926290520643, 0.9999999874447242};
const std::vector<double> kErfcxQ32 = {0.11046695329319409, 0.6445992907878291, 1.61970608899897,
                                       1.997270612001423, 1.0};

// f32 e^r on |r| <= ln2 / 2 (exp's reduced argument), degree 6: a minimax fit
// (relative error 1.9e-9), one term shorter than the Taylor polynomial of degree 7
// it replaced (5e-9), codegen/math_fits.py. Degree 5 (7.5e-8) took exp to 2.5 ulp,
// past its bound of 2.
const std::vector<double> kExp32 = {
    0.001383680023558181, 0.008374823858397523, 0.041668226823638695, 0.16666420074995,
    0.49999992072272564,  1.0000000363438577,   1.0000000005547895};
// f32 (e^r - 1) / r on |r| <= ln2 / 2, degree 5: a minimax fit (relative error
// 1.1e-8; it was degree 6, 2.3e-10, and Taylor's of degree 7 before that, 6e-10),
// codegen/math_fits.py.
const std::vector<double> kExpm1Over32 = {0.0013888606925417748, 0.00836907500564689,
                                          0.041667140377943515,  0.166665061638945,
                                          0.4999999811177934,    1.0000000106330649};

// f32 (e^r - 1 - r) / r^2 on |r| <= ln2 / 2, degree 4: kExpm1Over32 less its
// first term, fitted so that e^r - 1 = r + r^2 P(r) keeps r exact (relative
// error 1.3e-8 of (e^r - 1) / r), codegen/math_fits.py; erf32.
const std::vector<double> kExpm1Tail32 = {0.0013882511359376824, 0.008366521136391514,
                                          0.041667200006829004, 0.16666543615158957,
                                          0.4999999815364226};

// Whether f's target fuses llvm.fmuladd into one rounding (x86: FMA3).
bool fuses_multiply_add(const llvm::Function& f) {
  return f.getFnAttribute("target-features").getValueAsString().contains("+fma");
}

// Emission helpers for one floating type.
struct M {
  llvm::IRBuilderBase& b;
  llvm::Type* ft;
  llvm::Type* it;  // integer of the same width
  bool dbl;
  int mant;  // explicit mantissa bits
  int bias;

  // x a float or double, or a vector of them (sin's and cos's vector variants,
  // a streaming-store loop's lanes: llvm_streamed_pass.cpp).
  M(llvm::IRBuilderBase& b, llvm::Value* x)
      : b(b),
        ft(x->getType()),
        it(llvm::Type::getIntNTy(b.getContext(), ft->getScalarSizeInBits())),
        dbl(ft->getScalarType()->isDoubleTy()),
        mant(dbl ? 52 : 23),
        bias(dbl ? 1023 : 127) {
    if (auto* v = llvm::dyn_cast<llvm::VectorType>(ft))
      it = llvm::VectorType::get(it, v->getElementCount());
  }

  llvm::Value* c(double v) { return llvm::ConstantFP::get(ft, v); }
  llvm::Value* ic(int64_t v) { return llvm::ConstantInt::get(it, uint64_t(v), true); }
  llvm::Value* call(ID id, llvm::Value* x) { return b.CreateUnaryIntrinsic(id, x); }
  llvm::Value* call(ID id, llvm::Value* x, llvm::Value* y) {
    return b.CreateBinaryIntrinsic(id, x, y);
  }
  llvm::Value* fma(llvm::Value* a, llvm::Value* x, llvm::Value* y) {
    return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {ft}, {a, x, y});
  }
  llvm::Value* add(llvm::Value* x, llvm::Value* y) { return b.CreateFAdd(x, y); }
  llvm::Value* sub(llvm::Value* x, llvm::Value* y) { return b.CreateFSub(x, y); }
  llvm::Value* mul(llvm::Value* x, llvm::Value* y) { return b.CreateFMul(x, y); }
  llvm::Value* div(llvm::Value* x, llvm::Value* y) { return b.CreateFDiv(x, y); }
  llvm::Value* sel(llvm::Value* cnd, llvm::Value* x, llvm::Value* y) {
    return b.CreateSelect(cnd, x, y);
  }
  llvm::Value* isnan(llvm::Value* x) { return b.CreateFCmpUNO(x, x); }
  llvm::Value* fabs(llvm::Value* x) { return call(llvm::Intrinsic::fabs, x); }
  // copysign(r, x) for an r with its sign bit clear (+0, a positive value, a
  // NaN) or already x's: x's sign bit or-ed in, two operations where copysign is
  // three (x86).
  llvm::Value* with_sign_of(llvm::Value* r, llvm::Value* x) {
    const int64_t sign =
        dbl ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int32_t>::min();
    llvm::Value* s = b.CreateAnd(b.CreateBitCast(x, it), ic(sign));
    return b.CreateBitCast(b.CreateOr(b.CreateBitCast(r, it), s), ft);
  }
  llvm::Value* rint(llvm::Value* x) { return call(llvm::Intrinsic::rint, x); }
  llvm::Value* floor(llvm::Value* x) { return call(llvm::Intrinsic::floor, x); }
  // x clamped to [lo, hi], a NaN passed through (x86: vmaxps and vminps with x
  // second, no select of its own), so that the formula after it gives NaN.
  llvm::Value* clamp(llvm::Value* x, double lo, double hi) {
    x = sel(b.CreateFCmpOLT(x, c(lo)), c(lo), x);
    return sel(b.CreateFCmpOGT(x, c(hi)), c(hi), x);
  }
  // Polynomial in x, coefficients highest degree first (Horner, fused where the target can).
  llvm::Value* poly(llvm::Value* x, const std::vector<double>& cs) {
    llvm::Value* r = c(cs[0]);
    for (size_t i = 1; i < cs.size(); ++i) r = fma(r, x, c(cs[i]));
    return r;
  }
  // poly for a small |x| (exp's reduced argument; erf's |x| up to 3.92), in f32
  // as c_0 + x q(x), q taken as Horner in x^2 over the pairs c_2k-1 + c_2k x: one multiplication
  // more (x^2) and the pairs in parallel, so that exp's degree 6 is 4
  // multiply-adds deep after the pairs instead of 6. For gelu, whose loop is
  // bound by how long its chain keeps operations waiting (17-19 cycles a vector
  // of 8 on one core for 22 multiply-adds, 11 cycles of the two pipes): 0.71-0.73
  // -> 0.65 ns an element in L1. Loops with shorter chains lose by the extra
  // multiplication (exp 0.333 -> 0.348, tanh 0.426 -> 0.462, expm1, sigmoid and
  // softmax rows likewise), so they keep Horner's. erf's degree 8 in |x|: 5 deep
  // instead of 8, 0.69-0.70 -> 0.61-0.63 ns with erf32's one-constant reduction
  // (0.68 with it alone). The last step is Horner's,
  // rounded once: pairs to the end cost exp 0.4 ulp and expm1 0.65 (over their
  // bounds), and gelu's rational fit in |x| up to 5.7 taken by pairs 0.8.
  llvm::Value* poly_short(llvm::Value* x, const std::vector<double>& cs) {
    if (dbl || cs.size() < 5) return poly(x, cs);
    // q's coefficients are cs but its last; pairs from the highest degree
    // down, an odd count leaving the top one alone.
    const size_t n = cs.size() - 1;
    std::vector<llvm::Value*> pairs;
    size_t i = 0;
    if (n % 2 == 1) pairs.push_back(c(cs[i++]));
    for (; i < n; i += 2) pairs.push_back(fma(c(cs[i]), x, c(cs[i + 1])));
    llvm::Value* x2 = mul(x, x);
    llvm::Value* q = pairs[0];
    for (size_t k = 1; k < pairs.size(); ++k) q = fma(q, x2, pairs[k]);
    return fma(q, x, c(cs[n]));
  }
  // p * 2^n for t = x / ln2 + (1.5 2^p + 2 bias) as reduce_ln2_magic makes it (with
  // k = bias): n + 2 bias (in [0, 4 bias]) in t's low bits. 2^n1 2^n2 in two exact
  // halves, n1 = floor(n / 2) and n2 = n - n1, from t's bits alone: half of them
  // shifted into the exponent field is n1 + bias there (1.5 2^p's bits, even,
  // shift out), all of them less that is n2 + bias. Four integer operations, no
  // conversion.
  llvm::Value* scale(llvm::Value* p, llvm::Value* t) {
    llvm::Value* bits = b.CreateBitCast(t, it);
    llvm::Value* e1 = b.CreateShl(b.CreateLShr(bits, ic(1)), ic(mant));
    llvm::Value* e2 = b.CreateSub(b.CreateShl(bits, ic(mant)), e1);
    return mul(mul(p, b.CreateBitCast(e1, ft)), b.CreateBitCast(e2, ft));
  }
  // ln2 split so that n * hi is exact for every n the reductions produce.
  double ln2_hi() const { return dbl ? 0x1.62e42fefa2000p-1 : 0x1.63p-1; }
  double ln2_lo() const { return dbl ? 7.371002565167799e-13 : -2.12194440054690583e-4; }

  // x - n ln2 with n = rint(x / ln2), for |x| / ln2 well inside 2^(p-2): returns
  // t = x / ln2 + (1.5 2^p + bias + k), an integer whose low mantissa bits are
  // n + k + bias (n rounded to nearest), so that no rint, conversion to an
  // integer or addition of the bias is needed to build 2^n from it.
  llvm::Value* reduce_ln2_magic(llvm::Value* x, int k, llvm::Value** n, llvm::Value** r) {
    const double magic = (dbl ? 0x1.8p52 : 0x1.8p23) + (bias + k);
    llvm::Value* t = fma(x, c(1.4426950408889634), c(magic));
    *n = sub(t, c(magic));
    llvm::Value* nn = b.CreateFNeg(*n);
    *r = fma(nn, c(ln2_lo()), fma(nn, c(ln2_hi()), x));
    return t;
  }

  // 2^(n + k) from reduce_ln2_magic's t, for n + k + bias in [0, 2 bias]: t's bits
  // shifted into the exponent field.
  llvm::Value* pow2_bits(llvm::Value* t) {
    return b.CreateBitCast(b.CreateShl(b.CreateBitCast(t, it), ic(mant)), ft);
  }

  // reduce_ln2_magic and 2^(n + k) at once.
  void reduce_ln2_pow2(llvm::Value* x, int k, llvm::Value** n, llvm::Value** r, llvm::Value** s) {
    *s = pow2_bits(reduce_ln2_magic(x, k, n, r));
  }

  // e^(-w q)'s reduction taken of q itself, for a power of two w: t as
  // reduce_ln2_magic makes it for -w q, and r2 = q + n ln2 / w, so that -w r2 is
  // the reduced argument (n ln2 / w as exact as n ln2). The caller evaluates its
  // polynomial in r2 with coefficients scaled by powers of -w (in_neg): the same
  // values as of -w q, scaled exactly, with no negation or multiplication by w.
  // With q_lo (a correction of q far below its ulp), r2 = (q + n ln2_hi / w) +
  // (q_lo + n ln2_lo / w): the exact part and the small one apart, one
  // multiply-add shorter a chain than adding q_lo to r2 afterwards.
  llvm::Value* reduce_ln2_neg(llvm::Value* q, double w, int k, llvm::Value** r2,
                              llvm::Value* q_lo = nullptr) {
    const double magic = (dbl ? 0x1.8p52 : 0x1.8p23) + (bias + k);
    llvm::Value* t = fma(q, c(-w * 1.4426950408889634), c(magic));
    llvm::Value* n = sub(t, c(magic));
    llvm::Value* hi = fma(n, c(ln2_hi() / w), q);
    *r2 = q_lo ? add(hi, fma(n, c(ln2_lo() / w), q_lo)) : fma(n, c(ln2_lo() / w), hi);
    return t;
  }
  // P(-w r) (cs highest degree first) as a polynomial in r, times (-w)^extra.
  static std::vector<double> in_neg(std::vector<double> cs, double w, int extra = 0) {
    for (size_t i = 0; i < cs.size(); ++i) cs[i] *= std::pow(-w, double(cs.size() - 1 - i) + extra);
    return cs;
  }

  // A NaN passes the clamp and every step after it.
  llvm::Value* exp(llvm::Value* x) {
    return exp_clamped(dbl ? clamp(x, -746.0, 710.0) : clamp(x, -104.0, 89.0));
  }
  // exp of an x that is at most 0 or NaN: the lower clamp alone, the same values.
  llvm::Value* exp_nonpositive(llvm::Value* x) {
    const double lo = dbl ? -746.0 : -104.0;
    return exp_clamped(sel(b.CreateFCmpOLT(x, c(lo)), c(lo), x));
  }
  llvm::Value* exp_clamped(llvm::Value* xc) {
    llvm::Value *n, *r;
    llvm::Value* t = reduce_ln2_magic(xc, bias, &n, &r);
    llvm::Value* p = poly(r, dbl ? taylor(13, 0) : kExp32);
    return scale(p, t);
  }

  // 1 - e^(-w q) for w q in [0, 40], accurate near 0 (reduce_ln2_neg): -expm1,
  // negated exactly (-s p + (1 - s)), so that it is +0, not -0, at q = 0.
  llvm::Value* one_minus_exp_neg(llvm::Value* q, double w) {
    llvm::Value* r2;
    llvm::Value* s = pow2_bits(reduce_ln2_neg(q, w, 0, &r2));
    // r + r^2/2! + ... = r * (1 + r/2! + r^2/3! + ...), r = -w r2
    llvm::Value* p = mul(r2, poly(r2, in_neg(dbl ? taylor(14, 1) : kExpm1Over32, w, 1)));
    return fma(b.CreateFNeg(s), p, sub(c(1.0), s));
  }

  // x = m 2^e with m in [sqrt(1/2), sqrt(2)), for a positive normal x (other x:
  // a value for the caller to replace): adding 1 - sqrt(1/2) to the bits carries
  // into the exponent exactly when the mantissa is at least sqrt(2)'s, so that
  // m's bits are the mantissa's plus sqrt(1/2)'s, in integer arithmetic only.
  void split_mantissa(llvm::Value* x, llvm::Value** e, llvm::Value** m) {
    const int64_t one = int64_t(bias) << mant;
    const int64_t sqrt_half = dbl ? 0x3fe6a09e667f3bcd : 0x3f3504f3;  // the bits of sqrt(1/2)
    const int64_t mmask = (int64_t(1) << mant) - 1;
    llvm::Value* bits = b.CreateAdd(b.CreateBitCast(x, it), ic(one - sqrt_half));
    *e = b.CreateSub(b.CreateLShr(bits, ic(mant)), ic(bias));
    *m = b.CreateBitCast(b.CreateAdd(b.CreateAnd(bits, ic(mmask)), ic(sqrt_half)), ft);
  }

  // log(1 + f) = 2s + 2s q(s^2) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: 2 atanh(s),
  // s = f / den, den = f + 2, by atanh's odd series. Returns 2s and sets *q
  // (log_sum adds them up). The caller computes den, in parallel with f where it
  // can (m + 1 for f = m - 1); f may be k times log1p's argument, with den = f +
  // 2k: then 2s is k times too.
  llvm::Value* log1p_parts(llvm::Value* f, llvm::Value* den, llvm::Value** q) {
    llvm::Value* s = div(f, den);
    llvm::Value* s2 = mul(s, s);
    if (dbl) {
      std::vector<double> cs;  // 1/(2k+1) for the odd series, highest first
      for (int k = 21; k >= 3; k -= 2) cs.push_back(1.0 / k);
      *q = mul(s2, poly(s2, cs));
    } else {
      // A minimax fit of degree 2 in s^2 (relative error 2.8e-7 of the
      // correction, under 1e-8 of the sum) instead of the series to 1/11: two
      // terms shorter. s^2 (c0 + s^2 (c1 + c2 s^2)) as c0 s^2 + s^4 (c1 + c2
      // s^2): two multiply-adds deep after s^2 instead of three steps.
      llvm::Value* s4 = mul(s2, s2);
      *q = fma(s4, fma(s2, c(0.14789787378791888), c(0.19994400535121204)),
               mul(s2, c(0.33333342406713734)));
    }
    // 2s as f - f s (equal: s = f / (f + 2)), which rounds once from f's side:
    // f itself for tiny f, its sign and subnormal bits included.
    return fma(b.CreateFNeg(f), s, f);
  }

  // e k_hi + (e k_lo + 2s w) + 2s w q: e log_b(2) + w log(1 + f) for the parts of
  // log1p_parts, ef = e as a float (null: none), k_hi + k_lo = log_b(2) (k_hi
  // exact times any exponent; k_lo 0 for log2, whose sum e + log2(m) is then
  // exact), w = log_b(e) (or 1/4 for log1p's 4f). e k_lo + 2s w waits on the
  // division but not on q, so that after q two multiply-adds are left (three
  // steps before; the loops are bound by how many operations are in flight).
  llvm::Value* log_sum(llvm::Value* two_s, llvm::Value* q, llvm::Value* ef, double k_hi,
                       double k_lo, double w) {
    if (w != 1.0) two_s = mul(two_s, c(w));
    llvm::Value* lo = ef && k_lo != 0.0 ? fma(ef, c(k_lo), two_s) : two_s;
    llvm::Value* r = fma(two_s, q, lo);
    return ef ? (k_hi == 1.0 ? add(ef, r) : fma(ef, c(k_hi), r)) : r;
  }

  // e log_b(2) + log_b(m) for x = 2^e m: k_hi + k_lo = log_b(2) (k_hi exact times
  // any exponent), scale = log_b(e) (1: the natural log, lm is log(m) itself).
  llvm::Value* log_base(llvm::Value* x, double k_hi, double k_lo, double scale) {
    const double min_normal = dbl ? 0x1p-1022 : 0x1p-126;
    const int boost = dbl ? 54 : 24;
    llvm::Value* sub_n = b.CreateFCmpOLT(x, c(min_normal));
    llvm::Value* xs = sel(sub_n, mul(x, c(std::ldexp(1.0, boost))), x);
    llvm::Value *e, *m;
    split_mantissa(xs, &e, &m);
    e = b.CreateSub(e, b.CreateSelect(sub_n, ic(boost), ic(0)));
    llvm::Value* q;
    llvm::Value* two_s = log1p_parts(sub(m, c(1.0)), add(m, c(1.0)), &q);
    llvm::Value* ef = b.CreateSIToFP(e, ft);
    llvm::Value* res = log_sum(two_s, q, ef, k_hi, k_lo, scale);
    const double inf = INFINITY;
    res = sel(b.CreateFCmpOEQ(x, c(inf)), x, res);
    res = sel(b.CreateFCmpOEQ(x, c(0.0)), c(-inf), res);
    res = sel(b.CreateFCmpULT(x, c(0.0)), c(NAN), res);  // negative or NaN
    return res;
  }

  llvm::Value* log(llvm::Value* x) { return log_base(x, ln2_hi(), ln2_lo(), 1.0); }
  // Exact at powers of two: e + log2(m), log2(m) = log(m) / ln 2.
  llvm::Value* log2(llvm::Value* x) { return log_base(x, 1.0, 0.0, 1.4426950408889634); }
  llvm::Value* log10(llvm::Value* x) {
    return dbl ? log_base(x, 0x1.3441350ap-2, -1.9043128467164274e-12, 0.4342944819032518)
               : log_base(x, 0x1.344p-2, 4.605038981195214e-06, 0.4342944819032518);
  }

  // sin (cos_shift = false) or cos (true).
  // Reduced from |x| (sin odd, cos even: the same bits as from x, every step
  // being symmetric in x's sign), so that sin(-0) is -0: from x itself r would
  // be fma(+0, pi/2, -0) = +0.
  llvm::Value* sincos(llvm::Value* x_signed, bool cos_shift) {
    llvm::Value* x = fabs(x_signed);
    llvm::Value* n = rint(mul(x, c(0.6366197723675814)));
    llvm::Value* nn = b.CreateFNeg(n);
    llvm::Value* r;
    if (dbl) {
      r = fma(nn, c(0x1.921fb544p+0), x);
      r = fma(nn, c(0x1.0b4611a6p-34), r);
      r = fma(nn, c(0x1.3198a2ep-69), r);
      r = fma(nn, c(0x1.b839a252049c1p-104), r);
    } else if (fuses_multiply_add(*b.GetInsertBlock()->getParent())) {
      // pi/2 in three floats: fma(-n, c1, x) is exact (x and n c1 are both
      // multiples of 2^-23 and differ by at most pi/4), and the residue is
      // 1e-23, as the four short constants' below: the same bits (every 64th
      // float up to 1e4 compared), one operation fewer.
      r = fma(nn, c(0x1.921fb6p+0), x);
      r = fma(nn, c(-0x1.777a5cp-25), r);
      r = fma(nn, c(-0x1.ee59dap-50), r);
    } else {
      r = fma(nn, c(1.5703125), x);
      r = fma(nn, c(4.837512969970703125e-4), r);
      r = fma(nn, c(7.549789954891882e-08), r);
      // The last constant's own rounding (pi/2 - c1 - c2 - c3 = -1.7e-15) cost
      // cos near its zeros 24 ulp at 1e4; with it the residue is 1e-23.
      r = fma(nn, c(-0x1.ee59dap-50), r);
    }
    llvm::Value* z = mul(r, r);
    // sin r = r + r^3 S(z); cos r = 1 - z/2 + z^2 C(z).
    // f32: minimax fits of degree 2 in z for (sin r - r) / r^3 and (cos r - 1 + z/2) / z^2
    // (weighted relative errors 1.3e-8 and 1.1e-9), a term shorter than Taylor's each.
    const std::vector<double> sin32 = {-0.00019587131717872723, 0.008332744763893214,
                                       -0.16666664656915753};
    const std::vector<double> cos32 = {2.454737927301665e-05, -0.0013888300745960556,
                                       0.0416666646635203, -0.5, 1.0};
    llvm::Value* sn = fma(mul(r, z), poly(z, dbl ? taylor(17, 3, 2, true) : sin32), r);
    std::vector<double> cc = dbl ? taylor(18, 0, 2, true) : cos32;
    llvm::Value* cs = poly(z, cc);
    // Quadrant q = n mod 4 (+1 for cos), the low bits of n as an integer: bit 0
    // picks cos r, bit 1 flips the sign. n past the integer's range (|x| over 3e9
    // in f32, where r is no longer reduced exactly anyway), inf or NaN (r and the
    // result NaN) give some integer, frozen: no poison.
    // f64 converts n to 32 bits (one vcvttpd2dq a vector where 64 bits take a
    // scalar conversion a lane on AVX2): n fits wherever r is the result, |x| up
    // to 1e4 (past it sin_or_cos takes libm's).
    llvm::Value* q;
    if (dbl) {
      llvm::Type* i32 = b.getInt32Ty();
      if (auto* v = llvm::dyn_cast<llvm::VectorType>(ft))
        i32 = llvm::VectorType::get(i32, v->getElementCount());
      q = b.CreateZExt(b.CreateFreeze(b.CreateFPToSI(n, i32)), it);
    } else {
      q = b.CreateFreeze(b.CreateFPToSI(n, it));
    }
    if (cos_shift) q = b.CreateAdd(q, ic(1));
    llvm::Value* odd = b.CreateICmpNE(b.CreateAnd(q, ic(1)), ic(0));
    llvm::Value* sign = b.CreateShl(b.CreateAnd(q, ic(2)), ic(dbl ? 62 : 30));
    if (!cos_shift)
      sign = b.CreateXor(sign, b.CreateAnd(b.CreateBitCast(x_signed, it),
                                           ic(dbl ? std::numeric_limits<int64_t>::min()
                                                  : std::numeric_limits<int32_t>::min())));
    llvm::Value* v = b.CreateBitCast(sel(odd, cs, sn), it);
    return b.CreateBitCast(b.CreateXor(v, sign), ft);
  }

  llvm::Value* tanh(llvm::Value* x) {
    // |x| clamped to 20 so that a NaN passes (vminps keeps its second operand).
    llvm::Value* a = fabs(x);
    a = sel(b.CreateFCmpOGT(a, c(20.0)), c(20.0), a);
    // u / (2 - u) with u = 1 - e^(-2a): the bits of t / (-2 - t) for t = -u, but
    // never -0, so that x's sign is or-ed in (two operations, copysign three).
    llvm::Value* u = one_minus_exp_neg(a, 2.0);
    return with_sign_of(div(u, sub(c(2.0), u)), x);
  }

  // x * y as an unevaluated sum hi + lo, exactly: with an FMA where the target
  // has one, else by Dekker's splitting (no libm fma call either way).
  void two_prod(llvm::Value* x, llvm::Value* y, llvm::Value** hi, llvm::Value** lo) {
    *hi = mul(x, y);
    if (fuses_multiply_add(*b.GetInsertBlock()->getParent())) {
      *lo = b.CreateIntrinsic(llvm::Intrinsic::fma, {ft}, {x, y, b.CreateFNeg(*hi)});
      return;
    }
    auto split = [&](llvm::Value* v, llvm::Value** h, llvm::Value** l) {
      llvm::Value* t = mul(c(dbl ? 134217729.0 : 4097.0), v);  // 2^27 + 1, 2^12 + 1
      *h = sub(t, sub(t, v));
      *l = sub(v, *h);
    };
    llvm::Value *xh, *xl, *yh, *yl;
    split(x, &xh, &xl);
    split(y, &yh, &yl);
    llvm::Value* e = add(sub(mul(xh, yh), *hi), mul(xh, yl));
    *lo = add(add(e, mul(xl, yh)), mul(xl, yl));
  }

  // erf(|x|) and erfc(|x|) in f64, each without cancellation where it matters. x = s z
  // with s = 1 or 1/sqrt 2: exp(-x^2) is evaluated from the exact square of z,
  // as any rounding of x^2 is amplified x^2-fold in the result; s2 = s^2 exactly.
  void erf_parts(llvm::Value* z, double s, double s2, llvm::Value** erf_a, llvm::Value** erfc_a) {
    llvm::Value* a = fabs(s == 1.0 ? z : mul(z, c(s)));
    std::vector<double> p1 = kErfSmall64;  // a (1 + (P - 1)), as erf32
    p1.back() -= 1.0;
    llvm::Value* small = fma(a, poly(mul(a, a), p1), a);
    llvm::Value *sq, *sq_lo;
    two_prod(z, z, &sq, &sq_lo);
    llvm::Value* e = mul(exp(b.CreateFNeg(mul(sq, c(s2)))), sub(c(1.0), mul(sq_lo, c(s2))));
    auto tail = [&](double lo, double hi, const std::vector<double>& cs) {
      llvm::Value* t = fma(a, c(2.0 / (hi - lo)), c(-(lo + hi) / (hi - lo)));
      return mul(e, poly(t, cs));
    };
    // erfc(a) for a >= 1/2; 0 past the last interval.
    llvm::Value* big = sel(b.CreateFCmpOLT(a, c(6.0)), tail(3, 6, kErfcx64_3_6), c(0.0));
    big = sel(b.CreateFCmpOLT(a, c(3.0)), tail(0.5, 3, kErfcx64_05_3), big);
    // Below 1/2, 1 - erf loses at most one bit.
    llvm::Value* lt = b.CreateFCmpOLT(a, c(0.5));
    *erf_a = sel(lt, small, sub(c(1.0), big));
    *erfc_a = sel(lt, sub(c(1.0), small), big);
  }

  llvm::Value* erf(llvm::Value* x) {
    if (!dbl) return erf32(x);
    llvm::Value *e, *ec;
    erf_parts(x, 1.0, 1.0, &e, &ec);
    return sel(isnan(x), x, call(llvm::Intrinsic::copysign, e, x));
  }

  // e^(-w (q + q_lo)) for w q in [0, 87] (f32; other q: a value for the caller
  // to discard), q_lo a correction of q far below its ulp (or null), w = 1 or
  // 1/2: exp's reduction taken of q itself, n = rint(-w q / ln2) and r2 = q + q_lo
  // + n ln2 / w (q + n ln2_hi / w exact, the rest rounded twice), e^r = P(-w r2) with P's
  // coefficients scaled by powers of -w (exactly), times 2^n from t's bits
  // (reduce_ln2_neg): no negation, no clamp, no multiplication by w.
  llvm::Value* exp_neg32(llvm::Value* q, llvm::Value* q_lo, double w) {
    llvm::Value* r2;
    llvm::Value* s = pow2_bits(reduce_ln2_neg(q, w, 0, &r2, q_lo));
    return mul(poly_short(r2, in_neg(kExp32, w)), s);
  }

  // f32 erf: 1 - e^-q, q = -log(erfc(a)) = a + a A(a) (kErfLogErfc32, by
  // poly_short), a = |x| clamped to 3.92, where erf rounds to 1 (a NaN passes).
  // One formula over the whole range: no branches blended, no division (the odd
  // polynomial below 1/2 and 1 - e^(-x^2) P(a) / Q(a) above, blended, before:
  // 25 multiply-adds, a division, a compare and a blend a vector; now 20 and the
  // clamp). 1 - e^-q as one_minus_exp_neg's -s p + (1 - s), with two changes
  // that only erf can take:
  // - r2 = q + n ln2 with ln2 in one float, one multiply-add: its error, n 2e-9,
  //   is far below erfc's ulp where n is large (the logistic functions and gelu
  //   need erfc or e^-x to their last bit there, and keep two constants);
  // - p = e^-r2 - 1 = -r2 + r2 (r2 P(-r2)) (kExpm1Tail32): rounded last on -r2
  //   plus a correction, not as a product with a polynomial near -1, for the
  //   same count (near 0, erf is -p: 1.17 ulp there, 1.52 the other way). For
  //   tanh's 1 - e^(-2 a) it costs a multiplication (-2 r2), which measured
  //   slower (0.425 -> 0.47 ns an element in cache).
  llvm::Value* erf32(llvm::Value* x) {
    llvm::Value* a = fabs(x);
    a = sel(b.CreateFCmpOGT(a, c(3.92)), c(3.92), a);
    llvm::Value* q = fma(a, poly_short(a, kErfLogErfc32), a);
    const double magic = 0x1.8p23 + bias;
    llvm::Value* t = fma(q, c(-1.4426950408889634), c(magic));
    llvm::Value* r2 = fma(sub(t, c(magic)), c(0.69314718055994530942), q);
    llvm::Value* s = pow2_bits(t);
    llvm::Value* p = fma(r2, mul(r2, poly(r2, in_neg(kExpm1Tail32, 1.0))), b.CreateFNeg(r2));
    return with_sign_of(fma(b.CreateFNeg(s), p, sub(c(1.0), s)), x);
  }

  // f32 gelu: x (1 - h) for x >= 0, x h below, h = erfc(a) / 2, a = |x| / sqrt 2;
  // h = exp(-x^2 / 2) P(a) / 2 Q(a), with x^2 exact as in erf_parts (its low part
  // folded into exp_neg32's reduced argument); 0 past a = 4 (where exp_neg32's
  // value is discarded).
  llvm::Value* gelu32(llvm::Value* x) {
    // P(a) / Q(a) taken as polynomials in |x| (coefficients scaled by powers of
    // 1/sqrt 2 in double, then rounded), P also halved.
    llvm::Value* ax = fabs(x);
    llvm::Value *sq, *sq_lo;
    two_prod(x, x, &sq, &sq_lo);
    std::vector<double> p = kErfcxP32, q = kErfcxQ32;
    for (size_t i = 0; i < p.size(); ++i)
      p[i] *= 0.5 * std::pow(0.5, 0.5 * double(p.size() - 1 - i));
    for (size_t i = 0; i < q.size(); ++i) q[i] *= std::pow(0.5, 0.5 * double(q.size() - 1 - i));
    llvm::Value* h = mul(exp_neg32(sq, sq_lo, 0.5), div(poly(ax, p), poly(ax, q)));
    h = sel(b.CreateFCmpOLT(ax, c(4.0 * 1.41421356237309504880)), h, c(0.0));
    // 1 - h for x >= 0, h below: |k - h| with k = 1 or 0 (the compare's mask and
    // 1's bits), the same values; and, subtract and abs where a blend was, which
    // leaves the multiply-add ports (the loop's bound) one operation fewer.
    llvm::Value* k = sel(b.CreateFCmpOGE(x, c(0.0)), c(1.0), c(0.0));
    return mul(x, fabs(sub(k, h)));
  }

  // 0.5 x (1 + erf(x / sqrt 2)); for x < 0, 1 + erf(-a) is erfc(a), computed directly.
  llvm::Value* gelu(llvm::Value* x) {
    if (!dbl) return gelu32(x);
    llvm::Value *e, *ec;
    erf_parts(x, 0.70710678118654752440, 0.5, &e, &ec);
    llvm::Value* one_plus = sel(b.CreateFCmpOGE(x, c(0.0)), add(c(1.0), e), ec);
    return mul(mul(c(0.5), x), one_plus);
  }

  llvm::Value* sqrt(llvm::Value* x) { return call(llvm::Intrinsic::sqrt, x); }
  llvm::Value* rsqrt(llvm::Value* x) { return div(c(1.0), sqrt(x)); }
  llvm::Value* sin(llvm::Value* x) { return sin_or_cos(b, x, false); }
  llvm::Value* cos(llvm::Value* x) { return sin_or_cos(b, x, true); }
  // log(1 + x): u = 1 + x rounded gives e (u = m 2^e, m in [sqrt(1/2), sqrt(2)) as
  // split_mantissa), and then g = 4 f = (1 + x) 2^(2-e) - 4 = fma(x, t, t - 4) with
  // t = 2^(2-e) from e's bits: the reduced f of the exact 1 + x, rounded once (t - 4
  // is exact while e < p; beyond, its rounding, 2^-p in f, is far below e ln2's ulp). No rounding
  // error of 1 + x to recover, and no mantissa: log(1 + x) = e ln2 + log1p(f),
  // log1p_parts taken of g = 4f (s = g / (g + 8)). 2^(2-e) is normal for every
  // finite u (e from -p to bias + 1); 4x and its quarter are exact for subnormal x.
  // The sign is x's (copysign: -0 for -0).
  llvm::Value* log1p(llvm::Value* x) {
    llvm::Value* u = add(c(1.0), x);
    const int64_t one = int64_t(bias) << mant;
    const int64_t sqrt_half = dbl ? 0x3fe6a09e667f3bcd : 0x3f3504f3;
    // k = e + bias (split_mantissa's exponent, unbiased below).
    llvm::Value* k =
        b.CreateLShr(b.CreateAdd(b.CreateBitCast(u, it), ic(one - sqrt_half)), ic(mant));
    llvm::Value* t = b.CreateBitCast(b.CreateShl(b.CreateSub(ic(2 * bias + 2), k), ic(mant)), ft);
    llvm::Value* g = fma(x, t, sub(t, c(4.0)));
    llvm::Value* q;
    llvm::Value* two_s = log1p_parts(g, add(g, c(8.0)), &q);  // 4 times log1p's
    llvm::Value* ef = b.CreateSIToFP(b.CreateSub(k, ic(bias)), ft);
    llvm::Value* r = log_sum(two_s, q, ef, ln2_hi(), ln2_lo(), 0.25);
    r = with_sign_of(r, x);  // r has x's sign but at x = -0 (+0)
    r = sel(b.CreateFCmpOEQ(x, c(INFINITY)), x, r);
    r = sel(b.CreateFCmpOEQ(x, c(-1.0)), c(-INFINITY), r);
    return sel(b.CreateFCmpULT(x, c(-1.0)), c(NAN), r);  // below -1 or NaN
  }

  // e^x - 1: exp's reduction x = n ln2 + r, then 2^n (e^r - 1) + (2^n - 1) with
  // e^r - 1 = r (1 + r/2! + ...), exact in the sum at n = 0. Taken as 2 (s p +
  // (s - 1/2)) with s = 2^(n-1), so that 2^n itself never overflows (n up to
  // 128, 1024): the product does, where e^x - 1 does. -1 below -40 (e^-40 is
  // under half an ulp of 1). Small x need no select of their own: at n = 0, r =
  // x and p = x (1 + x/2 + ...) rounds to x below 2^-(p+1), and halving it
  // rounds only where it is subnormal (by one unit, 1 ulp there); the result
  // has x's sign, or-ed in for -0 (where r is +0).
  llvm::Value* expm1(llvm::Value* x) {
    llvm::Value* xc = clamp(x, -40.0, dbl ? 710.0 : 89.0);
    llvm::Value *n, *r, *s;
    reduce_ln2_pow2(xc, -1, &n, &r, &s);
    llvm::Value* p = mul(r, poly(r, dbl ? taylor(14, 1) : kExpm1Over32));
    return with_sign_of(mul(fma(s, p, sub(s, c(0.5))), c(2.0)), x);
  }

  llvm::Value* ceil(llvm::Value* x) { return call(llvm::Intrinsic::ceil, x); }
  llvm::Value* round(llvm::Value* x) { return rint(x); }  // half to even
  llvm::Value* trunc(llvm::Value* x) { return call(llvm::Intrinsic::trunc, x); }

  // 1 / (1 + e^-x). e^-x needs no gradual underflow (1 + it is 1 there), nor
  // exp's scaling in two halves: with 2 e^r times 2^(n-1) from its bits, -x
  // clamped to [-87.5, 89] (f32; [-708, 710] f64) makes the scale 0 at the
  // bottom, where the result is 1, and the product infinite above the range.
  // The reduction is taken of x (reduce_ln2_neg): no negation.
  llvm::Value* sigmoid(llvm::Value* x) {
    llvm::Value* r2;
    llvm::Value* s =
        pow2_bits(reduce_ln2_neg(clamp(x, dbl ? -710.0 : -89.0, dbl ? 708.0 : 87.5), 1.0, -1, &r2));
    std::vector<double> cs = dbl ? taylor(13, 0) : kExp32;
    for (double& v : cs) v *= 2;  // exact
    llvm::Value* e = mul(poly(r2, in_neg(cs, 1.0)), s);
    return div(c(1.0), add(c(1.0), e));
  }

  // max(x, y) + log1p(exp(-|x - y|)), and x + log 2 where x == y (+-inf too).
  llvm::Value* logaddexp(llvm::Value* x, llvm::Value* y) {
    llvm::Value* m = call(llvm::Intrinsic::maximum, x, y);
    llvm::Value* r = add(m, log1p(exp(b.CreateFNeg(fabs(sub(x, y))))));
    return sel(b.CreateFCmpOEQ(x, y), add(x, c(0.69314718055994530942)), r);
  }

  // f(x, y) computed in double and rounded once, for a float x and y.
  template <class F>
  llvm::Value* in_double(llvm::Value* x, llvm::Value* y, F f) {
    if (dbl) return f(*this, x, y);
    llvm::Type* d = ft->getWithNewType(b.getDoubleTy());
    llvm::Value* xd = b.CreateFPExt(x, d);
    M md(b, xd);
    return b.CreateFPTrunc(f(md, xd, b.CreateFPExt(y, d)), ft);
  }

  // atan2(y, x): atan(t) of t = min(|x|, |y|) / max(|x|, |y|) in [0, 1], as
  // pi/4 + atan((t - 1) / (t + 1)) above 0.66, by Cephes' rational fit (P/Q);
  // then reflected into the quadrant of (x, y). 0/0 takes t = 0 and inf/inf t = 1,
  // so signed zeros and infinities come out as C's atan2.
  llvm::Value* atan2(llvm::Value* y, llvm::Value* x) {
    return in_double(y, x, [](M& m, llvm::Value* y, llvm::Value* x) { return m.atan2_d(y, x); });
  }
  llvm::Value* atan2_d(llvm::Value* y, llvm::Value* x) {
    llvm::Value* ax = fabs(x);
    llvm::Value* ay = fabs(y);
    llvm::Value* hi = call(llvm::Intrinsic::maxnum, ax, ay);
    llvm::Value* lo = call(llvm::Intrinsic::minnum, ax, ay);
    llvm::Value* t = div(lo, hi);
    t = sel(b.CreateFCmpOEQ(hi, c(0.0)), c(0.0), t);
    t = sel(b.CreateFCmpOEQ(lo, c(INFINITY)), c(1.0), t);
    t = sel(isnan(ax), ax, sel(isnan(ay), ay, t));
    llvm::Value* big = b.CreateFCmpOGT(t, c(0.66));
    llvm::Value* u = sel(big, div(sub(t, c(1.0)), add(t, c(1.0))), t);
    const std::vector<double> p = {-8.750608600031904122785e-1, -1.615753718733365076637e1,
                                   -7.500855792314704667340e1, -1.228866684490136173410e2,
                                   -6.485021904942025371773e1};
    const std::vector<double> q = {1.0,
                                   2.485846490142306297962e1,
                                   1.650270098316988542046e2,
                                   4.328810604912902668951e2,
                                   4.853903996359136964868e2,
                                   1.945506571482613964425e2};
    llvm::Value* z = mul(u, u);
    llvm::Value* a = fma(mul(u, z), div(poly(z, p), poly(z, q)), u);
    constexpr double pio4 = 0.78539816339744830962, pio2 = 1.57079632679489661923,
                     pi = 3.14159265358979323846;
    a = sel(big, add(c(pio4), a), a);
    a = sel(b.CreateFCmpOGT(ay, ax), sub(c(pio2), a), a);
    llvm::Value* x_negative = b.CreateICmpSLT(b.CreateBitCast(x, it), ic(0));
    a = sel(x_negative, sub(c(pi), a), a);
    return call(llvm::Intrinsic::copysign, a, y);
  }

  // sqrt(x^2 + y^2): in double for floats (exact squares, one rounding); for
  // doubles max * sqrt(1 + (min / max)^2), so nothing overflows or underflows on
  // the way. Infinite if either is, even against a NaN.
  llvm::Value* hypot(llvm::Value* x, llvm::Value* y) {
    llvm::Value* ax = fabs(x);
    llvm::Value* ay = fabs(y);
    llvm::Value* h;
    if (!dbl) {
      llvm::Type* d = ft->getWithNewType(b.getDoubleTy());
      llvm::Value* xd = b.CreateFPExt(x, d);
      llvm::Value* yd = b.CreateFPExt(y, d);
      M md(b, xd);
      h = b.CreateFPTrunc(md.sqrt(md.add(md.mul(xd, xd), md.mul(yd, yd))), ft);
    } else {
      llvm::Value* hi = call(llvm::Intrinsic::maxnum, ax, ay);
      llvm::Value* lo = call(llvm::Intrinsic::minnum, ax, ay);
      llvm::Value* r = div(lo, hi);
      h = mul(hi, sqrt(fma(r, r, c(1.0))));
      h = sel(b.CreateFCmpOEQ(hi, c(0.0)), c(0.0), h);
      h = sel(b.CreateOr(isnan(ax), isnan(ay)), c(NAN), h);
    }
    return sel(b.CreateOr(b.CreateFCmpOEQ(ax, c(INFINITY)), b.CreateFCmpOEQ(ay, c(INFINITY))),
               c(INFINITY), h);
  }

  llvm::Value* pow(llvm::Value* x, llvm::Value* y) {
    llvm::Value* ax = fabs(x);
    llvm::Value* r = exp(mul(y, log(ax)));
    llvm::Value* fy = floor(y);
    llvm::Value* y_int = b.CreateFCmpOEQ(fy, y);
    llvm::Value* y_odd = b.CreateFCmpOEQ(sub(y, mul(c(2.0), floor(mul(y, c(0.5))))), c(1.0));
    llvm::Value* sign = b.CreateICmpSLT(b.CreateBitCast(x, it), ic(0));
    r = sel(b.CreateAnd(sign, y_odd), b.CreateFNeg(r), r);
    const double inf = INFINITY;
    llvm::Value* finite_neg = b.CreateAnd(b.CreateFCmpOLT(x, c(0.0)), b.CreateFCmpOGT(x, c(-inf)));
    r = sel(b.CreateAnd(finite_neg, b.CreateNot(y_int)), c(NAN), r);
    llvm::Value* one = b.CreateOr(b.CreateFCmpOEQ(y, c(0.0)), b.CreateFCmpOEQ(x, c(1.0)));
    one =
        b.CreateOr(one, b.CreateAnd(b.CreateFCmpOEQ(ax, c(1.0)), b.CreateFCmpOEQ(fabs(y), c(inf))));
    return sel(one, c(1.0), r);
  }
};

}  // namespace

llvm::Value* sincos_fast(llvm::IRBuilderBase& b, llvm::Value* x, bool cos) {
  return M(b, x).sincos(x, cos);
}

llvm::Value* math(llvm::IRBuilderBase& b, kir::ScalarOp op, llvm::Value* x, llvm::Value* y) {
  M m(b, x);
  switch (op) {
#define KILN_LLVM_MATH(k, name) \
  case kir::ScalarOp::k:        \
    return m.k(x);
#define KILN_LLVM_MATH2(k, name) \
  case kir::ScalarOp::k:         \
    return m.k(x, y);
#define KILN_OP(name, arity, category, shape_rule, dtype_rule, vjp, cost, scalar, ...) \
  KILN_SCALAR_MATH_N(1, KILN_LLVM_MATH, name, arity, scalar)                           \
  KILN_SCALAR_MATH_N(2, KILN_LLVM_MATH2, name, arity, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_LLVM_MATH
#undef KILN_LLVM_MATH2
    default:
      break;
  }
  throw Error(std::string("CPU backend: ") + std::string(kir::scalar_op_name(op)) +
              " is not a math op");
}

llvm::Value* exp_nonpositive(llvm::IRBuilderBase& b, llvm::Value* x) {
  return M(b, x).exp_nonpositive(x);
}

bool expands(kir::ScalarOp op) {
  switch (op) {
    case kir::ScalarOp::sqrt:
    case kir::ScalarOp::rsqrt:
    case kir::ScalarOp::floor:
    case kir::ScalarOp::ceil:
    case kir::ScalarOp::round:
    case kir::ScalarOp::trunc:
      return false;
    default:
      return op == kir::ScalarOp::pow || kir::is_float_only(op);
  }
}

llvm::Value* pow(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y) {
  if (x->getType()->getScalarType()->isFloatTy()) {
    llvm::Type* d = x->getType()->getWithNewType(b.getDoubleTy());
    llvm::Value* xd = b.CreateFPExt(x, d);
    llvm::Value* r = M(b, xd).pow(xd, b.CreateFPExt(y, d));
    return b.CreateFPTrunc(r, x->getType());
  }
  return M(b, x).pow(x, y);
}

}  // namespace kiln::llvm_math
