// Saved graphs: save -> load -> run matches the traced function bit for bit,
// parameters round trip exactly, and damaged files are clean kiln::Errors.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "frontend/serialize.h"
#include "frontend/tensor_impl.h"
#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/binary_io.h"
#include "test_util.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// A fresh directory for one test's files.
std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_serialize_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string slurp(const std::string& path) {
  return io::read_file(path);
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Same dtype, shape and bytes.
bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  size_t n = static_cast<size_t>(x.numel()) * dtype_size(x.dtype());
  return n == 0 || std::memcmp(x.impl()->view().data, y.impl()->view().data, n) == 0;
}

}  // namespace

TEST_CASE("serialize: a saved MLP loads and runs bit-identically to the traced function") {
  manual_seed(7);
  Tensor w1 = randn({8, 16}), b1 = randn({16}), w2 = randn({16, 4});
  auto f = jit(
      [&](Tensor x) {
        Tensor h = (x.matmul(w1) + b1).relu();
        return std::make_tuple(h.matmul(w2).softmax(1), h.sum());
      },
      "mlp");
  Tensor x = randn({5, 8});
  auto [want_p, want_s] = f(x);
  std::string path = temp_dir("mlp") + "/mlp.kiln";
  save_graph(path, f.graph(x, /*optimized=*/false), {w1, b1, w2}, {"mlp"});

  LoadedFunction lf = load(path);
  CHECK(lf.name() == "mlp");
  REQUIRE(lf.arg_types().size() == 1);
  CHECK(lf.arg_types()[0].str() == "f32[5,8]");
  std::vector<Tensor> got = lf({x});
  REQUIRE(got.size() == 2);
  CHECK(bit_equal(got[0], want_p));
  CHECK(bit_equal(got[1], want_s));
  // A second call runs the cached plan and gives the same again; so does a strided argument.
  Tensor xt = x.t().contiguous().t();
  CHECK(!xt.is_contiguous());
  CHECK(bit_equal(lf({xt})[0], want_p));
  // The loaded graph prints as the traced one (locations included).
  PrintOptions po;
  po.locations = true;
  CHECK(print_graph(lf.graph(), po) == print_graph(f.graph(x, false), po));
}

TEST_CASE("serialize: parameters round trip exactly, special values and every dtype") {
  Graph g;
  Builder b(g);
  Value pf = b.param(0, TensorType{DType::f32, {6}, {}}, "floats");
  Value pd = b.param(1, TensorType{DType::f64, {2, 2}, {}});
  Value pi = b.param(2, TensorType{DType::i32, {3}, {}}, "ints \"quoted\"");
  Value pl = b.param(3, TensorType{DType::i64, {}, {}}, "scalar");
  Value pb = b.param(4, TensorType{DType::b8, {2, 3}, {}}, "mask");
  Value pe = b.param(5, TensorType{DType::f32, {0, 4}, {}}, "empty");
  g.outputs = {pf, pd, pi, pl, pb, pe};
  float inf = std::numeric_limits<float>::infinity();
  std::vector<Tensor> params = {
      tensor({0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-45f}),
      tensor({{1e308, -2.5e-308}, {3.0, std::numeric_limits<double>::quiet_NaN()}}, kFloat64),
      tensor({INT32_MIN, -1, INT32_MAX}, kInt32),
      scalar_tensor(static_cast<long long>(INT64_MIN), TensorOptions(DType::i64)),
      tensor({true, false, true, false, false, true}).reshape({2, 3}),
      zeros({0, 4}),
  };
  std::string path = temp_dir("params") + "/p.kiln";
  save_graph(path, g, params);
  SavedGraph sg = load_graph(path);
  CHECK(sg.name.empty());
  REQUIRE(sg.params.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) CHECK_MESSAGE(bit_equal(sg.params[i], params[i]), i);
  CHECK(sg.graph.str() == g.str());
  CHECK(load(path).name() == "p");  // no saved name: the file's stem
}

TEST_CASE("serialize: parameter updates apply to the loaded function's own parameters") {
  manual_seed(3);
  Tensor w = randn({4, 3});
  Tensor w_saved = w.clone();
  auto step = jit(
      [&](Tensor x) {
        Tensor loss = x.matmul(w).pow(2).sum();
        w.sub_(x.t().matmul(x.matmul(w)) * 0.01);
        return loss;
      },
      "step");
  Tensor x = randn({2, 4});
  Graph g = step.graph(x, false);
  REQUIRE(!g.updates.empty());
  std::string path = temp_dir("updates") + "/step.kiln";
  save_graph(path, g, {w_saved});
  LoadedFunction lf = load(path);
  for (int i = 0; i < 3; ++i) {
    Tensor want = step(x);
    Tensor got = lf({x})[0];
    CHECK(bit_equal(got, want));
    CHECK(bit_equal(lf.params()[0], w));
  }
  CHECK(!bit_equal(w, w_saved));
}

TEST_CASE("serialize: clear errors for wrong arguments and unsavable graphs") {
  Tensor w = ones({3});
  auto f = jit([&](Tensor x) { return x * w; }, "scale");
  Tensor x = ones({3});
  std::string path = temp_dir("errors") + "/scale.kiln";
  save_graph(path, f.graph(x, false), {w});
  LoadedFunction lf = load(path);
  KILN_CHECK_ERROR(lf({}), "scale.kiln", "expected 1 arguments (f32[3]), got 0");
  KILN_CHECK_ERROR(lf({ones({4})}), "argument 0 is f32[4], expected f32[3]");
  KILN_CHECK_ERROR(lf({ones({3}, kFloat64)}), "argument 0 is f64[3], expected f32[3]");
  KILN_CHECK_ERROR(lf({Tensor()}), "argument 0 is an undefined tensor");

  KILN_CHECK_ERROR(save_graph(path, f.graph(x, false), {}), "has 1 parameters, got 0 tensors");
  KILN_CHECK_ERROR(save_graph(path, f.graph(x, false), {ones({4})}),
                   "parameter 0 is f32[4], expected f32[3]");
  KILN_CHECK_ERROR(load_graph(path + ".missing"), "scale.kiln.missing: cannot open");
  KILN_CHECK_ERROR(load_graph(fs::path(path).parent_path().string()), "is a directory");
}

TEST_CASE("serialize: damaged, truncated and foreign files name the file and the problem") {
  Tensor w = arange(0.0, 1000.0);
  auto f = jit([&](Tensor x) { return (x + w).sum(); }, "big");
  Tensor x = ones({1000});
  std::string dir = temp_dir("damage");
  std::string path = dir + "/model.kiln";
  save_graph(path, f.graph(x, false), {w});
  const std::string good = slurp(path);
  std::string bad = dir + "/bad.kiln";

  spit(bad, good.substr(0, good.size() - 2017));
  KILN_CHECK_ERROR(load_graph(bad), "bad.kiln: truncated at byte", "in parameter 0",
                   "(expected 4000 bytes of data");
  spit(bad, good.substr(0, 20));
  KILN_CHECK_ERROR(load_graph(bad), "bad.kiln: truncated at byte 20 in the header");
  spit(bad, good.substr(0, good.size() - 3));
  KILN_CHECK_ERROR(load_graph(bad), "truncated at byte", "in the checksum");

  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  spit(bad, flipped);
  KILN_CHECK_ERROR(load_graph(bad), "bad.kiln: checksum mismatch (file damaged)");

  std::string v7 = good;
  v7[11] = 7;
  spit(bad, v7);
  KILN_CHECK_ERROR(load_graph(bad),
                   "bad.kiln: format version 7 is not supported (this build reads version 1)");

  spit(bad, good + "extra");
  KILN_CHECK_ERROR(load_graph(bad), "5 unexpected bytes after the end");
  spit(bad, "\x93NUMPY\x01\x00 whatever");
  KILN_CHECK_ERROR(load_graph(bad), "not a Kiln graph file", "NumPy");
  spit(bad, "");
  KILN_CHECK_ERROR(load_graph(bad), "not a Kiln graph file");
}

// Replaces the size field and checksum so that a mutated file passes the
// integrity checks and reaches the structural and semantic ones.
std::string reseal(std::string bytes) {
  if (bytes.size() < 27 + 8) return bytes;
  for (int i = 0; i < 8; ++i) bytes[15 + i] = static_cast<char>((bytes.size() >> (8 * i)) & 0xff);
  uint64_t sum = io::checksum64(bytes.data(), bytes.size() - 8);
  for (int i = 0; i < 8; ++i)
    bytes[bytes.size() - 8 + i] = static_cast<char>((sum >> (8 * i)) & 0xff);
  return bytes;
}

TEST_CASE("serialize: no return line, an oversized shape or a device file are errors") {
  Tensor w = ones({5, 6, 7});
  auto f = jit([&](Tensor x) { return (x + w).sum(); }, "sealed");
  std::string dir = temp_dir("sealed");
  std::string path = dir + "/model.kiln";
  save_graph(path, f.graph(ones({5, 6, 7}), false), {w});
  const std::string good = slurp(path);
  std::string bad = dir + "/bad.kiln";

  // The return line commented out (same length, so every offset still holds).
  std::string no_return = good;
  size_t at = no_return.find("\nreturn ");
  REQUIRE(at != std::string::npos);
  no_return.replace(at + 1, 2, "//");
  spit(bad, reseal(no_return));
  KILN_CHECK_ERROR(load_graph(bad), "bad.kiln", "expected a 'return' line");

  // Parameter 0's shape [5,6,7] becomes [2^31,2^31,7]: 2^62 * 7 elements overflow.
  auto u64 = [](uint64_t v) {
    std::string b(8, '\0');
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return b;
  };
  std::string huge = good;
  at = huge.find(u64(5) + u64(6) + u64(7));
  REQUIRE(at != std::string::npos);
  huge.replace(at, 16, u64(uint64_t(1) << 31) + u64(uint64_t(1) << 31));
  spit(bad, reseal(huge));
  KILN_CHECK_ERROR(load_graph(bad), "parameter 0", "shape [2147483648,2147483648,7] is too large");

  KILN_CHECK_ERROR(load_graph("/dev/zero"), "/dev/zero: is a character device",
                   "expected a regular file");
}

TEST_CASE("serialize: a few hundred seeded mutations load cleanly or throw kiln::Error") {
  manual_seed(11);
  Tensor w = randn({6, 5}), bias = randn({5});
  auto f = jit([&](Tensor x) { return (x.matmul(w) + bias).tanh().mean(0); }, "fuzz");
  Tensor x = randn({3, 6});
  std::string dir = temp_dir("fuzz");
  std::string path = dir + "/fuzz.kiln";
  save_graph(path, f.graph(x, false), {w, bias});
  const std::string good = slurp(path);
  std::mt19937_64 rng(1234);
  auto pick = [&](size_t n) { return n == 0 ? size_t(0) : static_cast<size_t>(rng() % n); };
  int loaded = 0, rejected = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::string m = good;
    int kind = static_cast<int>(rng() % 7);
    switch (kind) {
      case 0:
        m.resize(pick(m.size()));
        break;
      case 1:
        for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k)
          m[pick(m.size())] ^= static_cast<char>(1 + rng() % 255);
        break;
      case 2: {
        uint32_t v = static_cast<uint32_t>(rng());
        std::memcpy(&m[11], &v, 4);
        break;
      }
      case 3: {
        size_t at = pick(m.size()), len = 1 + pick(64);
        m.insert(at, m.substr(at, len));
        break;
      }
      case 4:
        m.erase(pick(m.size()), 1 + pick(64));
        break;
      case 5:
        m[pick(m.size())] ^= static_cast<char>(1 << (rng() % 8));
        m = reseal(m);
        break;
      case 6: {
        size_t at = pick(m.size()), len = 1 + pick(16);
        if (rng() % 2)
          m.erase(at, len);
        else
          m.insert(at, m.substr(at, len));
        m = reseal(m);
        break;
      }
    }
    std::string p = dir + "/m.kiln";
    spit(p, m);
    try {
      SavedGraph sg = load_graph(p);
      verify(sg.graph);
      CHECK_MESSAGE(kind >= 5, "trial ", trial, ": an unsealed mutation loaded");
      ++loaded;
    } catch (const Error& e) {
      CHECK_MESSAGE(std::string(e.what()).find("m.kiln") != std::string::npos, e.what());
      ++rejected;
    }
  }
  MESSAGE("mutations: " << loaded << " loaded (resealed, harmless), " << rejected << " rejected");
  CHECK(rejected > 400);
}

TEST_CASE("serialize: a graph whose arg or param indices are not 0..n-1 is an error, not a crash") {
  auto loaded = [](const std::string& text, size_t n_params) {
    Graph g = parse_graph(text, "<test>");
    std::vector<Tensor> params(n_params, zeros({2}, TensorOptions(kFloat64)));
    return LoadedFunction(SavedGraph{g, params, ""}, "<test>");
  };
  KILN_CHECK_ERROR(loaded("%0 = arg {index=1} : f64[2]\nreturn %0\n", 0), "arg index 1",
                   "indices 0..0");
  KILN_CHECK_ERROR(loaded("%0 = arg {index=0} : f64[2]\n%1 = arg {index=0} : f64[2]\n"
                          "%2 = add %0, %1 : f64[2]\nreturn %2\n",
                          0),
                   "a second arg with index 0");  // the verifier's
  KILN_CHECK_ERROR(loaded("%0 = param {index=3} : f64[2]\nreturn %0\n", 1), "param index 3");
  // Args listed out of index order take their types by index.
  LoadedFunction f = loaded("%0 = arg {index=1} : f64[3]\n%1 = arg {index=0} : f64[2]\nreturn %1\n", 0);
  REQUIRE(f.arg_types().size() == 2);
  CHECK(f.arg_types()[0].shape == Shape{2});
  CHECK(f.arg_types()[1].shape == Shape{3});
}

}  // namespace kiln
