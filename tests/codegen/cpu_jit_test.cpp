// The LLVM side of the CPU backend: the loops vectorise (vector types in the
// optimised IR, ymm/zmm registers in the assembly, no libm calls), the math
// polynomials are accurate over wide sweeps, and the on-disk object cache hits,
// detects damage and recompiles.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <thread>

#include "codegen/lower.h"
#include "codegen_test_util.h"
#include "runtime/llvm_jit.h"
#include "runtime/reference_math.h"
#include "runtime/object_cache.h"

using namespace kiln;
using namespace kiln::test;

namespace {

CpuCompileOptions with_texts() {
  CpuCompileOptions o;
  o.want_artifacts = true;
  return o;
}

bool has_vectors(const std::string& ir, const char* elem) {
  for (int w : {4, 8, 16}) {
    if (ir.find("<" + std::to_string(w) + " x " + elem + ">") != std::string::npos) return true;
  }
  return false;
}

bool has_wide_registers(const std::string& asm_text) {
  return asm_text.find("%ymm") != std::string::npos || asm_text.find("%zmm") != std::string::npos;
}

// The text of the assembly between the kernel's label and its end.
std::string calls_in(const std::string& asm_text) {
  std::string out;
  std::istringstream in(asm_text);
  for (std::string line; std::getline(in, line);)
    if (line.find("call") != std::string::npos) out += line + "\n";
  return out;
}

// A temporary directory removed at the end of the scope.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln_cg_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Captures what the process writes to stderr while alive.
struct StderrCapture {
  int saved = -1;
  std::string file;
  StderrCapture() {
    file = (std::filesystem::temp_directory_path() / ("kiln_cg_stderr_" + std::to_string(getpid())))
               .string();
    std::fflush(stderr);
    saved = dup(2);
    FILE* f = std::fopen(file.c_str(), "w");
    dup2(fileno(f), 2);
    std::fclose(f);
  }
  std::string finish() {
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::filesystem::remove(file);
    return ss.str();
  }
};

Graph exp_chain(DType dt, const Shape& s) {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(dt, s));
  Value y = b.arg(1, ty(dt, s));
  Value e = b.unary(OpKind::exp, x);
  g.outputs = {b.add(b.mul(e, y), b.unary(OpKind::tanh, y))};
  return g;
}

Graph softmax_graph(DType dt, const Shape& s) {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(dt, s));
  const int64_t last = int64_t(s.size()) - 1;
  Value m =
      b.op(OpKind::max, {x},
           Attrs{{AttrKey::dims, std::vector<int64_t>{last}}, {AttrKey::keepdim, int64_t{1}}});
  Value e = b.unary(OpKind::exp, b.sub(x, m));
  Value sum = b.sum(e, {last}, true);
  g.outputs = {b.div(e, sum)};
  return g;
}

}  // namespace

TEST_CASE("the host target is described") {
  const std::string d = cpu_target_description();
  CHECK(d.find(LlvmJit::get().cpu_name()) == 0);
  CHECK(d.find("+sse2") != std::string::npos);
  MESSAGE("target: " << d.substr(0, 120));
}

TEST_CASE("an exp chain vectorises: vector IR, ymm/zmm registers, no libm calls") {
  for (DType dt : {DType::f32, DType::f64}) {
    Graph g = exp_chain(dt, {64, 1000});
    CpuKernel k = compile_cpu_kernel(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)),
                                     with_texts());
    const char* elem = dt == DType::f32 ? "float" : "double";
    CAPTURE(std::string(elem));
    CHECK(has_vectors(k.artifacts.llvm_ir_opt, elem));
    CHECK(has_wide_registers(k.artifacts.assembly));
    CHECK(k.artifacts.llvm_ir_opt.find("@exp") == std::string::npos);
    CHECK(k.artifacts.llvm_ir_opt.find("@tanh") == std::string::npos);
    CHECK(calls_in(k.artifacts.assembly) == "");
    CHECK(k.artifacts.llvm_ir.find("define void @kiln_kernel_") != std::string::npos);
    CHECK(k.artifacts.kernel_ir.find("exp") != std::string::npos);
  }
}

TEST_CASE("every transcendental op vectorises") {
  for (OpKind op : all_ops()) {
    if (!is_math(op) && op != OpKind::pow) continue;
    for (DType dt : {DType::f32, DType::f64}) {
      Graph g;
      Builder b(g);
      Value x = b.arg(0, ty(dt, {4096}));
      const bool binary = op_info(op).arity == 2;
      g.outputs = {binary ? b.binary(op, x, b.arg(1, ty(dt, {4096}))) : b.unary(op, x)};
      CpuKernel k = compile_cpu_kernel(
          g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)), with_texts());
      CAPTURE(std::string(op_name(op)));
      CAPTURE(std::string(dtype_name(dt)));
      CHECK(has_vectors(k.artifacts.llvm_ir_opt, dt == DType::f32 ? "float" : "double"));
      CHECK(has_wide_registers(k.artifacts.assembly));
      CHECK(calls_in(k.artifacts.assembly) == "");
    }
  }
}

TEST_CASE("softmax is one kernel whose inner loops vectorise") {
  Graph g = softmax_graph(DType::f32, {128, 1000});
  FusionGroup grp = make_group(g, GroupKind::Reduction, all_compute_nodes(g));
  CpuKernel k = compile_cpu_kernel(g, grp, with_texts());
  CHECK(k.info.range == 128);
  CHECK(has_vectors(k.artifacts.llvm_ir_opt, "float"));
  CHECK(has_wide_registers(k.artifacts.assembly));
  CHECK(calls_in(k.artifacts.assembly) == "");
  // Three inner loops: max, sum of exp, write.
  CHECK(std::count(k.artifacts.kernel_ir.begin(), k.artifacts.kernel_ir.end(), '\n') > 10);
  size_t loops = 0;
  for (size_t p = 0; (p = k.artifacts.kernel_ir.find("for i", p)) != std::string::npos; ++p)
    ++loops;
  CHECK(loops == 3);
  MESSAGE("softmax kernel IR:\n" << k.artifacts.kernel_ir);
}

TEST_CASE("a scan of one column per line keeps its running value in a register, in order") {
  // A load of the element just stored would put store-to-load forwarding on the
  // loop's critical path (2-3x slower than the serial fold in eager mode).
  for (int64_t reverse : {0, 1}) {
    Graph g;
    Builder b(g);
    Value x = b.arg(0, ty(DType::f32, {3, 5000}));
    g.outputs = {
        b.op(OpKind::cumsum, {x}, Attrs{{AttrKey::dim, int64_t(1)}, {AttrKey::reverse, reverse}})};
    CpuKernel k =
        compile_cpu_kernel(g, make_group(g, GroupKind::Scan, all_compute_nodes(g)), with_texts());
    CHECK(k.artifacts.kernel_ir.find("acc0 = cumsum f32 ordered") != std::string::npos);
    CHECK(k.artifacts.kernel_ir.find("load buf1") == std::string::npos);
    CHECK(k.artifacts.llvm_ir_opt.find("reassoc") == std::string::npos);
    // Against the serial fold of the reference kernel, bit for bit.
    std::vector<float> in(3 * 5000), out(in.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = float(std::sin(double(i))) * 0.1f;
    void* ptrs[] = {in.data(), out.data()};
    k.fn(ptrs, 0, k.info.range);
    for (int64_t r = 0; r < 3; ++r) {
      float run = 0;
      for (int64_t j = 0; j < 5000; ++j) {
        const int64_t c = reverse ? 4999 - j : j;
        run += in[size_t(r * 5000 + c)];
        REQUIRE(out[size_t(r * 5000 + c)] == run);
      }
    }
  }
}

TEST_CASE("a reduction over leading dims walks blocks of contiguous columns") {
  // A bias's gradient: summing [rows, columns] over the rows. Each output element
  // striding down its column reads one float per 40 KB at 10001 columns.
  struct Case {
    OpKind op;
    Shape shape;
    std::vector<int64_t> dims;
    bool column_form;
  };
  const std::vector<Case> cases = {
      {OpKind::sum, {300, 10001}, {0}, true},   // 10001 = 73 * 137: blocks of 137
      {OpKind::sum, {5, 7, 48}, {0, 1}, true},  // two leading dims
      {OpKind::max, {33, 96}, {0}, true},
      {OpKind::min, {33, 2, 64}, {0}, true},
      {OpKind::sum, {40, 257}, {0}, true},  // 257 columns (prime): blocks of 128, the last guarded
      {OpKind::max, {9, 2741}, {0}, true},
      {OpKind::sum, {6, 64, 5}, {1}, false},   // a middle dim: the row form
      {OpKind::sum, {70000, 16}, {0}, false},  // a long sum folds in f64
  };
  for (const Case& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      CAPTURE(std::string(op_name(c.op)));
      CAPTURE(shape_str(c.shape));
      CAPTURE(std::string(dtype_name(dt)));
      Graph g;
      Builder b(g);
      Value x = b.unary(OpKind::exp, b.arg(0, ty(dt, c.shape)));  // a producer fuses in
      g.outputs = {b.op(c.op, {x}, Attrs{{AttrKey::dims, c.dims}, {AttrKey::keepdim, int64_t(0)}})};
      CpuKernel k = check_whole_graph(g, GroupKind::Reduction, 5, {}, Tolerance{1e-5, 1e-6});
      const std::string ir =
          print_kernel(lower_group(g, make_group(g, GroupKind::Reduction, all_compute_nodes(g)),
                                   LowerOptions{.column_reductions = true}));
      CHECK((ir.find("acc0") == std::string::npos) == c.column_form);
    }
  }
  // With a full-size output that the sum does not feed (a logits' gradient, also
  // summed for the bias), stored in the same pass, and a per-column epilogue (its
  // square, for a gradient norm) after it; a full-size output reading the sum
  // keeps the row form.
  for (bool reads_sum : {false, true}) {
    Graph g;
    Builder b(g);
    Value y = b.mul(b.unary(OpKind::exp, b.arg(0, ty(DType::f32, {64, 480}))),
                    b.constant(2.0, DType::f32));
    Value s = b.sum(y, {0}, true);
    g.outputs = {reads_sum ? b.sub(y, s) : y, s, b.mul(s, s)};
    check_whole_graph(g, GroupKind::Reduction, 9, {}, Tolerance{1e-5, 1e-6});
    const std::string ir =
        print_kernel(lower_group(g, make_group(g, GroupKind::Reduction, all_compute_nodes(g)),
                                 LowerOptions{.column_reductions = true}));
    CHECK((ir.find("acc0") == std::string::npos) == !reads_sum);
  }
}

TEST_CASE("a multi-pass row kernel prefetches the next row during its second pass") {
  auto prefetches = [](const Graph& g, GroupKind kind) {
    CpuKernel k = compile_cpu_kernel(g, make_group(g, kind, all_compute_nodes(g)), with_texts());
    CHECK(has_vectors(k.artifacts.llvm_ir_opt, "float"));  // the blocked pass still vectorises
    return k.artifacts.llvm_ir.find("@llvm.prefetch") != std::string::npos;
  };
  CHECK(prefetches(softmax_graph(DType::f32, {16, 4096}), GroupKind::Reduction));
  CHECK(prefetches(softmax_graph(DType::f32, {16, 1500}), GroupKind::Reduction));
  // Rows under 4 KB stay with the hardware prefetcher.
  CHECK_FALSE(prefetches(softmax_graph(DType::f32, {128, 1000}), GroupKind::Reduction));
  // One pass over each row: nothing is read twice, nothing to overlap.
  Graph sum;
  Builder b(sum);
  sum.outputs = {b.sum(b.unary(OpKind::exp, b.arg(0, ty(DType::f32, {16, 4096}))), {1}, true)};
  CHECK_FALSE(prefetches(sum, GroupKind::Reduction));
  // Layer-norm-like rows: the second pass (the variance) has no math op to hide behind.
  Graph ln;
  Builder c(ln);
  Value x = c.arg(0, ty(DType::f32, {16, 4096}));
  Value xc = c.sub(x, c.mul(c.sum(x, {1}, true), c.constant(1.0 / 4096, DType::f32)));
  ln.outputs = {c.mul(xc, c.sum(c.mul(xc, xc), {1}, true))};
  CHECK_FALSE(prefetches(ln, GroupKind::Reduction));
}

// Max error in ulps of the result type against a long double reference.
template <class T, class F, class R>
double max_ulp_error(F compiled, R reference, const std::vector<T>& xs, double* worst_x = nullptr) {
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const long double want = reference(static_cast<long double>(xs[i]));
    const T got = compiled[i];
    if (std::isnan(double(want))) {
      if (!std::isnan(double(got))) worst = std::numeric_limits<double>::infinity();
      continue;
    }
    const T w = static_cast<T>(want);
    if (std::isinf(double(w))) {
      if (got != w) worst = std::numeric_limits<double>::infinity();
      continue;
    }
    const long double ulp = std::max<long double>(
        std::nextafter(std::abs(w), std::numeric_limits<T>::infinity()) - std::abs(w),
        std::numeric_limits<T>::denorm_min());
    const double e = double(std::abs(static_cast<long double>(got) - want) / ulp);
    if (e > worst && worst_x) *worst_x = double(xs[i]);
    worst = std::max(worst, e);
  }
  return worst;
}

template <class T>
std::vector<T> run_unary(OpKind op, const std::vector<T>& xs) {
  const DType dt = dtype_of<T>();
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(dt, {int64_t(xs.size())}));
  g.outputs = {b.unary(op, x)};
  CpuKernel k =
      compile_cpu_kernel(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)), {});
  Buf in = make_buf(ty(dt, {int64_t(xs.size())}));
  Buf out = make_buf(ty(dt, {int64_t(xs.size())}));
  std::copy(xs.begin(), xs.end(), static_cast<T*>(in.data()));
  void* ptrs[] = {in.data(), out.data()};
  k.fn(ptrs, 0, k.info.range);
  const T* p = static_cast<const T*>(out.data());
  return std::vector<T>(p, p + xs.size());
}

template <class T>
std::vector<T> run_binary(OpKind op, const std::vector<T>& xs, const std::vector<T>& ys) {
  const DType dt = dtype_of<T>();
  const TensorType t = ty(dt, {int64_t(xs.size())});
  Graph g;
  Builder b(g);
  g.outputs = {b.binary(op, b.arg(0, t), b.arg(1, t))};
  CpuKernel k =
      compile_cpu_kernel(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)), {});
  Buf in0 = make_buf(t), in1 = make_buf(t), out = make_buf(t);
  std::copy(xs.begin(), xs.end(), static_cast<T*>(in0.data()));
  std::copy(ys.begin(), ys.end(), static_cast<T*>(in1.data()));
  void* ptrs[] = {in0.data(), in1.data(), out.data()};
  k.fn(ptrs, 0, k.info.range);
  const T* p = static_cast<const T*>(out.data());
  return std::vector<T>(p, p + xs.size());
}

template <class T>
std::vector<T> sweep(double lo, double hi, int n, bool log_scale = false) {
  std::vector<T> xs;
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < n; ++i) {
    const double t = u(rng);
    xs.push_back(T(log_scale ? std::exp(std::log(lo) + t * (std::log(hi) - std::log(lo)))
                             : lo + t * (hi - lo)));
  }
  return xs;
}

// The reference kernels' scalar math of a math op of the table, in long double:
// r1 for a unary op, r2 for a binary one.
struct RefLong {
  long double (*r1)(long double) = nullptr;
  long double (*r2)(long double, long double) = nullptr;
};
RefLong ref_math_long(OpKind k) {
  switch (k) {
#define KILN_REF_LONG1(m, name) \
  case OpKind::name:            \
    return {[](long double x) { return ref_math::m(x); }, nullptr};
#define KILN_REF_LONG2(m, name) \
  case OpKind::name:            \
    return {nullptr, [](long double x, long double y) { return ref_math::m(x, y); }};
#define KILN_OP(name, arity, category, shape, dtype, vjp, cost, scalar, domain) \
  KILN_SCALAR_MATH_N(1, KILN_REF_LONG1, name, arity, scalar)                    \
  KILN_SCALAR_MATH_N(2, KILN_REF_LONG2, name, arity, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_REF_LONG1
#undef KILN_REF_LONG2
    default:
      FAIL("not a math op: " << op_name(k));
      return {};
  }
}

TEST_CASE("math accuracy over wide sweeps (max ulp error vs long double)") {
  struct Fn {
    OpKind op;
    double lo, hi;
    bool log_scale;
    long double (*ref)(long double);
    double max_ulp32, max_ulp64;
  };
  auto lexp = [](long double x) { return std::exp(x); };
  auto llog = [](long double x) { return std::log(x); };
  auto lsin = [](long double x) { return std::sin(x); };
  auto lcos = [](long double x) { return std::cos(x); };
  auto ltanh = [](long double x) { return std::tanh(x); };
  auto lsig = [](long double x) { return 1 / (1 + std::exp(-x)); };
  auto lerf = [](long double x) { return std::erf(x); };
  auto lsqrt = [](long double x) { return std::sqrt(x); };
  auto lrsqrt = [](long double x) { return 1 / std::sqrt(x); };
  auto llog1p = [](long double x) { return std::log1p(x); };
  auto lexpm1 = [](long double x) { return std::expm1(x); };
  auto lfloor = [](long double x) { return std::floor(x); };
  auto lceil = [](long double x) { return std::ceil(x); };
  auto lround = [](long double x) { return std::nearbyint(x); };
  auto ltrunc = [](long double x) { return std::trunc(x); };
  // erfc keeps the negative side free of cancellation in the reference too.
  auto lgelu = [](long double x) { return 0.5L * x * std::erfc(-x / std::sqrt(2.0L)); };
  std::vector<Fn> fns = {
      {OpKind::exp, -80, 80, false, +lexp, 2, 4},
      {OpKind::exp, -700, 700, false, +lexp, 1e9, 4},  // f32 saturates: inf/0 match
      {OpKind::log, 1e-30, 1e30, true, +llog, 2, 4},
      {OpKind::log, 0.5, 2, false, +llog, 2, 4},
      {OpKind::sin, -100, 100, false, +lsin, 2, 4},
      {OpKind::cos, -100, 100, false, +lcos, 2, 4},
      {OpKind::sin, -1e4, 1e4, false, +lsin, 3, 4},
      {OpKind::tanh, -10, 10, false, +ltanh, 3, 4},
      {OpKind::tanh, -1e-3, 1e-3, false, +ltanh, 2, 4},
      {OpKind::sigmoid, -30, 30, false, +lsig, 3, 4},
      {OpKind::gelu, -5.5, 6, false, +lgelu, 5, 8},
      {OpKind::gelu, -8.3, -5.7, false, +lgelu, 1e30, 8},
      {OpKind::erf, -6, 6, false, +lerf, 3, 6},
      {OpKind::erf, -1e-3, 1e-3, false, +lerf, 3, 6},
      {OpKind::sqrt, 1e-30, 1e30, true, +lsqrt, 0.5, 0.5},
      {OpKind::rsqrt, 1e-30, 1e30, true, +lrsqrt, 1.5, 1.5},  // 1 / sqrt: two roundings
      {OpKind::log1p, -0.999, 1e6, false, +llog1p, 4, 5},
      {OpKind::log1p, -1e-4, 1e-4, false, +llog1p, 4, 5},
      {OpKind::expm1, -30, 80, false, +lexpm1, 4, 5},
      {OpKind::expm1, -1e-4, 1e-4, false, +lexpm1, 4, 5},
      {OpKind::floor, -1e6, 1e6, false, +lfloor, 0, 0},
      {OpKind::ceil, -1e6, 1e6, false, +lceil, 0, 0},
      {OpKind::round, -1e6, 1e6, false, +lround, 0, 0},
      {OpKind::trunc, -1e6, 1e6, false, +ltrunc, 0, 0},
  };
  // The binary math ops over pairs: x uniform in [lo, hi] (or log-uniform in
  // magnitude with either sign), y likewise.
  struct Fn2 {
    OpKind op;
    double lo, hi;
    bool log_scale;
    long double (*ref)(long double, long double);
    double max_ulp32, max_ulp64;
    double lo2 = NAN, hi2 = NAN;  // y's range when it is not x's
  };
  auto latan2 = [](long double y, long double x) { return std::atan2(y, x); };
  auto lhypot = [](long double x, long double y) { return std::hypot(x, y); };
  auto llogaddexp = [](long double x, long double y) {
    return std::max(x, y) + std::log1p(std::exp(-std::abs(x - y)));
  };
  std::vector<Fn2> fns2 = {
      {OpKind::atan2, -10, 10, false, +latan2, 1, 2},
      {OpKind::atan2, 1e-30, 1e30, true, +latan2, 1, 2},
      {OpKind::hypot, -10, 10, false, +lhypot, 1, 2},
      {OpKind::hypot, 1e-30, 1e30, true, +lhypot, 1, 2},
      // Away from results near 0, where the formula itself cancels (the reference too).
      {OpKind::logaddexp, 1, 50, false, +llogaddexp, 4, 5},
  };
  // A math op of the table that no sweep above names is swept over its row's
  // domain against its reference math (runtime/reference_math.h) in long double,
  // within kDefaultUlp: a new op needs no line here, unless its reference form
  // loses accuracy somewhere in its domain (gelu's on the negative side): then
  // it gets sweeps of its own with a better reference.
  constexpr double kDefaultUlp = 4;
  for (OpKind k : all_ops()) {
    if (!is_math(k) ||
        std::any_of(fns.begin(), fns.end(), [&](const Fn& f) { return f.op == k; }) ||
        std::any_of(fns2.begin(), fns2.end(), [&](const Fn2& f) { return f.op == k; }))
      continue;
    const Domain& d = op_info(k).domain;
    if (op_info(k).arity == 1)
      fns.push_back({k, d.low(0), d.high(0), false, ref_math_long(k).r1, kDefaultUlp, kDefaultUlp});
    else
      fns2.push_back({k, d.low(0), d.high(0), false, ref_math_long(k).r2, kDefaultUlp, kDefaultUlp,
                      d.low(1), d.high(1)});
  }
  for (const Fn2& f : fns2) {
    auto pairs = [&](auto zero) {
      using T = decltype(zero);
      std::vector<T> xs = sweep<T>(f.lo, f.hi, 20000, f.log_scale), ys = xs;
      std::shuffle(ys.begin(), ys.end(), std::mt19937_64(7));
      if (!std::isnan(f.lo2)) ys = sweep<T>(f.lo2, f.hi2, 20000, f.log_scale);
      if (f.log_scale)  // every quadrant
        for (size_t i = 0; i < xs.size(); ++i) {
          if (i & 1) xs[i] = -xs[i];
          if (i & 2) ys[i] = -ys[i];
        }
      std::vector<T> got = run_binary(f.op, xs, ys);
      // max_ulp_error takes a unary reference: index the pair through it.
      std::vector<T> index(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) index[i] = T(i);
      return max_ulp_error<T>(
          got, [&](long double i) { return f.ref(xs[size_t(i)], ys[size_t(i)]); }, index);
    };
    const double e32 = pairs(0.0f), e64 = pairs(0.0);
    MESSAGE(std::string(op_name(f.op)) << " on [" << f.lo << ", " << f.hi << "]^2: f32 " << e32
                                       << " ulp, f64 " << e64 << " ulp");
    CAPTURE(std::string(op_name(f.op)));
    CHECK(e32 <= f.max_ulp32);
    CHECK(e64 <= f.max_ulp64);
  }
  for (const Fn& f : fns) {
    auto x32 = sweep<float>(f.lo, f.hi, 20000, f.log_scale);
    auto x64 = sweep<double>(f.lo, f.hi, 20000, f.log_scale);
    double w32 = 0, w64 = 0;
    const double e32 = max_ulp_error<float>(run_unary(f.op, x32), f.ref, x32, &w32);
    const double e64 = max_ulp_error<double>(run_unary(f.op, x64), f.ref, x64, &w64);
    MESSAGE(std::string(op_name(f.op))
            << " on [" << f.lo << ", " << f.hi << "]: f32 " << e32 << " ulp (at " << w32
            << "), f64 " << e64 << " ulp (at " << w64 << ")");
    CAPTURE(std::string(op_name(f.op)));
    CHECK(e32 <= f.max_ulp32);
    CHECK(e64 <= f.max_ulp64);
  }
}

TEST_CASE("special values of every math op match the reference") {
  const std::vector<double> specials = {0.0,    -0.0,   1.0,   -1.0,   1e-30,    -1e-30,    1e-45,
                                        88.7,   89.0,   -87.0, -103.0, -104.5,   709.7,     710.0,
                                        -745.0, -746.0, 1e30,  -1e30,  INFINITY, -INFINITY, NAN};
  for (OpKind op : all_ops()) {
    if (!is_math(op)) continue;
    // A binary op on every pair of special values: x down the rows, y across.
    const bool binary = op_info(op).arity == 2;
    for (DType dt : {DType::f32, DType::f64}) {
      const int64_t n = int64_t(specials.size());
      Graph g;
      Builder b(g);
      g.outputs = {binary ? b.binary(op, b.arg(0, ty(dt, {n, 1})), b.arg(1, ty(dt, {n})))
                          : b.unary(op, b.arg(0, ty(dt, {n})))};
      Buf in = make_buf(ty(dt, binary ? Shape{n, 1} : Shape{n}));
      Buf in1 = make_buf(ty(dt, {n}));
      visit_dtype(dt, [&](auto t) {
        using T = decltype(t);
        if constexpr (std::is_floating_point_v<T>)
          for (int64_t i = 0; i < n; ++i) {
            static_cast<T*>(in.data())[i] = T(specials[size_t(i)]);
            static_cast<T*>(in1.data())[i] = T(specials[size_t(i)]);
          }
      });
      std::vector<Buf> vals = reference_eval(g, binary ? std::vector<Buf>{in, in1} : std::vector<Buf>{in});
      CAPTURE(std::string(op_name(op)));
      CAPTURE(std::string(dtype_name(dt)));
      // sin/cos of huge arguments are not reduced exactly; skip 1e30 for them.
      FusionGroup grp = make_group(g, GroupKind::Elementwise, all_compute_nodes(g));
      CpuKernel k = compile_cpu_kernel(g, grp, {});
      auto outs = run_kernel(g, k, vals, grp);
      const Buf& got = outs.begin()->second;
      const Buf& want = vals[g.outputs[0].node];
      visit_dtype(dt, [&](auto t) {
        using T = decltype(t);
        if constexpr (std::is_floating_point_v<T>) {
          for (int64_t i = 0; i < (binary ? n * n : n); ++i) {
            const double x = specials[size_t(binary ? i / n : i)];
            if ((op == OpKind::sin || op == OpKind::cos) && std::abs(x) > 1e4 && std::isfinite(x))
              continue;
            const T a = static_cast<const T*>(got.data())[i],
                    w = static_cast<const T*>(want.data())[i];
            CAPTURE(x);
            CAPTURE((binary ? specials[size_t(i % n)] : 0.0));
            CAPTURE(double(a));
            CAPTURE(double(w));
            if (std::isnan(w)) {
              CHECK(std::isnan(a));
            } else if (std::isinf(w) || w == 0) {
              CHECK(a == w);
            } else {
              CHECK(std::abs(a - w) <=
                    1e-5 * std::abs(w) + std::numeric_limits<T>::denorm_min() * 4);
            }
          }
        }
      });
    }
  }
}

// The exp chain as one elementwise group, with random inputs and the reference's values.
struct ExpChainCase {
  Graph g;
  FusionGroup grp;
  std::vector<Buf> args, vals;
  ExpChainCase(std::vector<int64_t> shape, uint64_t seed)
      : g(exp_chain(DType::f32, shape)),
        grp(make_group(g, GroupKind::Elementwise, all_compute_nodes(g))) {
    std::mt19937_64 rng(seed);
    args = {make_buf(ty(DType::f32, shape)), make_buf(ty(DType::f32, shape))};
    for (Buf& a : args) fill_random(a, rng);
    vals = reference_eval(g, args);
  }
};

TEST_CASE("disk cache: a second compile loads the object; damage is detected and repaired") {
  TempDir dir;
  ExpChainCase c({16, 50}, 3);
  const Graph& g = c.g;
  const FusionGroup& grp = c.grp;
  const std::vector<Buf>& vals = c.vals;
  CpuCompileOptions o;
  o.cache_dir = dir.path;
  o.reuse_loaded = false;  // the disk cache alone

  CpuKernel first = check_group(g, grp, vals, {}, o);
  CHECK_FALSE(first.artifacts.from_disk_cache);
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) entries.push_back(e.path());
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].extension() == ".kobj");

  CpuKernel second = check_group(g, grp, vals, {}, o);
  CHECK(second.artifacts.from_disk_cache);
  CHECK(second.artifacts.compile_ms < first.artifacts.compile_ms);

  // With artifacts wanted, a hit still fills the texts.
  CpuCompileOptions ot = o;
  ot.want_artifacts = true;
  CpuKernel third = compile_cpu_kernel(g, grp, ot);
  CHECK(third.artifacts.from_disk_cache);
  CHECK(has_vectors(third.artifacts.llvm_ir_opt, "float"));
  CHECK(!third.artifacts.assembly.empty());

  // Damage, each kind in a fresh cache: a truncated payload, a flipped byte, junk, and
  // a directory where the entry should be (recompiled, never an abort; it cannot be
  // replaced, so that is reported too).
  for (int kind = 0; kind < 4; ++kind) {
    TempDir d2;
    CpuCompileOptions o2;
    o2.cache_dir = d2.path;
    o2.reuse_loaded = false;
    (void)compile_cpu_kernel(g, grp, o2);
    std::filesystem::path entry;
    for (const auto& e : std::filesystem::directory_iterator(d2.path)) entry = e.path();
    const auto size = std::filesystem::file_size(entry);
    if (kind == 0) {
      std::filesystem::resize_file(entry, size - 100);
    } else if (kind == 1) {
      std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(std::streamoff(size / 2));
      char c = 0;
      f.read(&c, 1);
      c = char(c ^ 0x55);
      f.seekp(std::streamoff(size / 2));
      f.write(&c, 1);
    } else if (kind == 2) {
      std::ofstream(entry, std::ios::binary | std::ios::trunc) << "junk";
    } else {
      std::filesystem::remove(entry);
      std::filesystem::create_directory(entry);
    }
    StderrCapture cap;
    CpuKernel again = check_group(g, grp, vals, {}, o2);
    CpuKernel fixed = compile_cpu_kernel(g, grp, o2);
    const std::string err = cap.finish();
    CAPTURE(kind);
    CAPTURE(err);
    CHECK_FALSE(again.artifacts.from_disk_cache);
    CHECK(fixed.artifacts.from_disk_cache == (kind != 3));
    CHECK(err.find("kiln: damaged cache entry " + entry.string() + ": ") == 0);
    CHECK(err.find("; recompiling\n") != std::string::npos);
    if (kind == 3) CHECK(err.find("is a directory (expected a regular file)") != std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == (kind == 3 ? 2 : 1));  // once each
    MESSAGE(err);
  }
}

TEST_CASE(
    "disk cache: an entry with a valid header and checksum but the wrong object is recompiled "
    "(#32.9)") {
  ExpChainCase c({16, 50}, 3);
  // Another kernel's object: the same group under another pipeline has another
  // key, so its object defines another symbol.
  TempDir other;
  CpuCompileOptions oo;
  oo.cache_dir = other.path;
  oo.reuse_loaded = false;
  oo.opt = LlvmOpt::Full;
  (void)compile_cpu_kernel(c.g, c.grp, oo);
  std::filesystem::path other_entry;
  for (const auto& e : std::filesystem::directory_iterator(other.path)) other_entry = e.path();
  const std::optional<std::string> other_object =
      ObjectCache(other.path).load(other_entry.stem().string());
  REQUIRE(other_object.has_value());

  for (int kind = 0; kind < 2; ++kind) {
    TempDir d;
    CpuCompileOptions o;
    o.cache_dir = d.path;
    o.reuse_loaded = false;
    (void)compile_cpu_kernel(c.g, c.grp, o);
    std::filesystem::path entry;
    for (const auto& e : std::filesystem::directory_iterator(d.path)) entry = e.path();
    const std::string key = entry.stem().string();
    // Stored through the cache itself: its header and checksum are right.
    ObjectCache(d.path).store(key, kind == 0 ? *other_object : std::string(4096, '\x7f'));
    REQUIRE(ObjectCache(d.path).load(key).has_value());
    StderrCapture cap;
    CpuKernel again = check_group(c.g, c.grp, c.vals, {}, o);  // runs, with the right values
    CpuKernel fixed = check_group(c.g, c.grp, c.vals, {}, o);
    CpuKernel third = compile_cpu_kernel(c.g, c.grp, o);
    const std::string err = cap.finish();
    CAPTURE(kind);
    CAPTURE(err);
    CHECK_FALSE(again.artifacts.from_disk_cache);
    CHECK(fixed.artifacts.from_disk_cache);  // the recompiled entry replaced it
    CHECK(third.artifacts.from_disk_cache);
    CHECK(err.find("kiln: damaged cache entry " + entry.string() + ": LLVM JIT: ") == 0);
    CHECK(err.find(kind == 0 ? "kernel symbol not found" : "cannot load the object") !=
          std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);  // reported once
  }
}

TEST_CASE("object cache entries: keys, atomic files and checks") {
  CHECK(fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(stable_hash_hex("kernel").size() == 32);
  CHECK(stable_hash_hex("kernel") == stable_hash_hex("kernel"));
  CHECK(stable_hash_hex("kernel") != stable_hash_hex("kernel "));
  TempDir dir;
  ObjectCache cache(dir.path + "/sub");
  CHECK_FALSE(cache.load("k1").has_value());
  std::string payload(5000, 'x');
  payload[17] = '\0';
  cache.store("k1", payload);
  REQUIRE(cache.load("k1").has_value());
  CHECK(*cache.load("k1") == payload);
  // An entry renamed to another key is refused.
  std::filesystem::copy_file(cache.path("k1"), cache.path("k2"));
  StderrCapture cap;
  CHECK_FALSE(cache.load("k2").has_value());
  CHECK(cap.finish().find("entry is for another key") != std::string::npos);
  // No temp files are left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path + "/sub")) {
    (void)e;
    ++files;
  }
  CHECK(files == 2);
}

TEST_CASE("kernels compiled twice in one process load side by side") {
  Graph g = exp_chain(DType::f64, {3, 5});
  FusionGroup grp = make_group(g, GroupKind::Elementwise, all_compute_nodes(g));
  CpuKernel a = compile_cpu_kernel(g, grp, {});
  CpuKernel b = compile_cpu_kernel(g, grp, {});
  CHECK(static_cast<bool>(a.fn));
  CHECK(static_cast<bool>(b.fn));
}

TEST_CASE("kernels compile concurrently from several threads") {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &ok] {
      Graph g = exp_chain(t % 2 ? DType::f64 : DType::f32, {int64_t(3 + t), 40});
      FusionGroup grp = make_group(g, GroupKind::Elementwise, all_compute_nodes(g));
      std::mt19937_64 rng{uint64_t(t)};
      std::vector<Buf> args;
      for (NodeId id : g.args()) {
        args.push_back(make_buf(g.node(id).type()));
        fill_random(args.back(), rng);
      }
      std::vector<Buf> vals = reference_eval(g, args);
      CpuKernel k = compile_cpu_kernel(g, grp, {});
      auto outs = run_kernel(g, k, vals, grp);
      ok[size_t(t)] = all_close(outs.begin()->second.view(), vals[g.outputs[0].node].view());
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(ok == std::vector<int>{1, 1, 1, 1});
}

TEST_CASE("buffers need no alignment by default; assume_aligned is an opt-in") {
  ExpChainCase c({4, 64}, 8);
  const Graph& g = c.g;
  const FusionGroup& grp = c.grp;
  const std::vector<Buf>& args = c.args;
  const std::vector<Buf>& vals = c.vals;
  // Every buffer 4 bytes past a 64-byte boundary.
  const size_t bytes = 4 * 64 * sizeof(float);
  std::vector<std::shared_ptr<Storage>> blocks;
  std::vector<void*> ptrs;
  for (int i = 0; i < 3; ++i) {
    blocks.push_back(Storage::allocate(bytes + 64));
    ptrs.push_back(static_cast<char*>(blocks.back()->data()) + 4);
    if (i < 2) std::memcpy(ptrs.back(), args[size_t(i)].data(), bytes);
  }
  CpuKernel k = compile_cpu_kernel(g, grp, {});
  k.fn(ptrs.data(), 0, k.info.range);
  CHECK(all_close(dense_view(ptrs[2], DType::f32, {4, 64}), vals[g.outputs[0].node].view()));

  CpuCompileOptions aligned;
  aligned.assume_aligned = true;
  check_group(g, grp, vals, {}, aligned);
}

TEST_CASE("an identical kernel already loaded is shared, and freed with its last user") {
  ExpChainCase c({16, 50}, 4);
  const Graph& g = c.g;
  const FusionGroup& grp = c.grp;
  const std::vector<Buf>& vals = c.vals;
  CpuCompileOptions o;  // no disk cache: a kernel not reused is compiled
  const size_t before = LlvmJit::get().loaded_objects();
  {
    CpuKernel first = check_group(g, grp, vals, {}, o);
    CHECK_FALSE(first.artifacts.reused);
    CHECK(first.artifacts.times.optimize_ms > 0);
    CpuKernel second = check_group(g, grp, vals, {}, o);
    CHECK(second.artifacts.reused);
    CHECK(reinterpret_cast<void*>(second.fn) == reinterpret_cast<void*>(first.fn));
    CHECK(second.artifacts.times.optimize_ms == 0);
    CHECK(LlvmJit::get().loaded_objects() == before + 1);
    // Dumps of a reused kernel still get its texts.
    CpuCompileOptions ot = o;
    ot.want_artifacts = true;
    CpuKernel third = compile_cpu_kernel(g, grp, ot);
    CHECK(third.artifacts.reused);
    CHECK(has_vectors(third.artifacts.llvm_ir_opt, "float"));
    // Another pipeline is another kernel.
    CpuCompileOptions full = o;
    full.opt = LlvmOpt::Full;
    CpuKernel other = check_group(g, grp, vals, {}, full);
    CHECK_FALSE(other.artifacts.reused);
    CHECK(LlvmJit::get().loaded_objects() == before + 2);
  }
  CHECK(LlvmJit::get().loaded_objects() == before);  // held weakly: freed with its users
  CpuKernel again = check_group(g, grp, vals, {}, o);
  CHECK_FALSE(again.artifacts.reused);
}
