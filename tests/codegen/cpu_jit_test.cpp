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

TEST_CASE("math kernels get 512-bit vectors exactly where the host has AVX-512") {
  const LlvmJit& jit = LlvmJit::get();
  const std::string& f = jit.cpu_features();
  const bool avx512 =
      f.find("+avx512f,") != std::string::npos && f.find("+evex512") != std::string::npos;
  CHECK(jit.vector_width() == (avx512 ? 512 : 0));
  CHECK((cpu_target_description().find("512-bit vectors") != std::string::npos) == avx512);
  Graph g = exp_chain(DType::f32, {64, 1000});
  CpuKernel k = compile_cpu_kernel(g, make_group(g, GroupKind::Elementwise, all_compute_nodes(g)),
                                   with_texts());
  CHECK((k.artifacts.llvm_ir.find("\"prefer-vector-width\"=\"512\"") != std::string::npos) ==
        avx512);
  // The vectorised exp runs in zmm registers where LLVM's tuning alone (256 for
  // most AVX-512 cores) would have used ymm.
  if (avx512) CHECK(k.artifacts.assembly.find("%zmm") != std::string::npos);
  // One instruction per element (rounding, sqrt): LLVM's width, which ran faster.
  for (OpKind op : {OpKind::round, OpKind::sqrt}) {
    Graph g1;
    Builder b(g1);
    g1.outputs = {b.unary(op, b.arg(0, ty(DType::f32, {4096})))};
    CpuKernel k1 = compile_cpu_kernel(
        g1, make_group(g1, GroupKind::Elementwise, all_compute_nodes(g1)), with_texts());
    CAPTURE(std::string(op_name(op)));
    CHECK(k1.artifacts.llvm_ir.find("prefer-vector-width") == std::string::npos);
  }
  MESSAGE("vector width: " << (avx512 ? "512" : "LLVM's choice for " + jit.cpu_name()));
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
      if (op == OpKind::sin || op == OpKind::cos) {
        // One test a vector of whether a lane is past the fast path's range;
        // the calls (libm's, lane by lane) only behind it.
        CHECK(k.artifacts.llvm_ir_opt.find("call i1 @llvm.vector.reduce.or") != std::string::npos);
        CHECK(k.artifacts.llvm_ir_opt.find("\nlanes") != std::string::npos);
      } else {
        CHECK(calls_in(k.artifacts.assembly) == "");
      }
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
      {OpKind::sum, {8, 32, 1024}, {1}, true},     // chunks of rows (split_column_sums): whole rows
      {OpKind::sum, {3, 50, 257}, {1}, true},      // several sums of a prime count of columns
      {OpKind::max, {4, 5, 7, 40}, {1, 2}, true},  // several sums over two dims
      {OpKind::sum, {2, 3, 8200}, {1}, true},      // rows wider than 4096: blocks of 4100
      {OpKind::sum, {6, 64, 5}, {1}, false},       // a middle dim of few columns: the row form
      {OpKind::sum, {70000, 16}, {0}, false},      // a long sum folds in f64
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

TEST_CASE("a reduction over leading dims and the last ones loops over the last block inside") {
  // A conv's bias gradient: [N, C, H', W'] summed over N, H' and W', with a
  // full-size output beside it; and the same with a max (its maximum over the
  // block of the last dims, then the rest).
  for (OpKind op : {OpKind::sum, OpKind::max}) {
    CAPTURE(std::string(op_name(op)));
    Graph g;
    Builder b(g);
    Value x = b.unary(OpKind::exp, b.arg(0, ty(DType::f32, {6, 5, 3, 16})));
    Value r =
        b.op(op, {x},
             Attrs{{AttrKey::dims, std::vector<int64_t>{0, 2, 3}}, {AttrKey::keepdim, int64_t(0)}});
    g.outputs = {r, x};
    check_whole_graph(g, GroupKind::Reduction, 41, {}, Tolerance{1e-5, 1e-6});
    const FusionGroup grp = make_group(g, GroupKind::Reduction, all_compute_nodes(g));
    // The reduced dims: 6 outer positions, then the block of 3 x 16 in order.
    const std::string ir = print_kernel(lower_group(g, grp, {}));
    CHECK(ir.find("in [0, 6)") != std::string::npos);
    CHECK(ir.find("in [0, 48)") != std::string::npos);
    CpuKernel k = compile_cpu_kernel(g, grp, with_texts());
    CHECK(has_vectors(k.artifacts.llvm_ir_opt, "float"));
  }
}

TEST_CASE("a multi-pass row kernel prefetches the next row during its last pass with a math op") {
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
  // Layer-norm-like rows: no pass after the first has a math op to hide behind.
  Graph ln;
  Builder c(ln);
  Value x = c.arg(0, ty(DType::f32, {16, 4096}));
  Value xc = c.sub(x, c.mul(c.sum(x, {1}, true), c.constant(1.0 / 4096, DType::f32)));
  ln.outputs = {c.mul(xc, c.sum(c.mul(xc, xc), {1}, true))};
  CHECK_FALSE(prefetches(ln, GroupKind::Reduction));
  // Layer norm itself: its output pass (the division by sqrt(var + eps)) carries them.
  Graph norm;
  Builder d(norm);
  Value y = d.arg(0, ty(DType::f32, {16, 1024}));
  Value yc = d.sub(y, d.mul(d.sum(y, {1}, true), d.constant(1.0 / 1024, DType::f32)));
  Value var = d.mul(d.sum(d.mul(yc, yc), {1}, true), d.constant(1.0 / 1024, DType::f32));
  norm.outputs = {d.div(yc, d.unary(OpKind::sqrt, d.add(var, d.constant(1e-5, DType::f32))))};
  CHECK(prefetches(norm, GroupKind::Reduction));
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
