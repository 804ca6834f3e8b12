// Regression tests for issue 32's files, memory and input items: a registry
// entry leaked per grad-mode traced call (#32.7), files larger than memory
// (#32.8), atomic writes that replaced devices and FIFOs (#32.10), and the
// smaller ones (data_ptr in a trace, logsumexp of nothing, invalid dtypes,
// types too large to exist, switch values).
#include "test_util.h"

#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "frontend/function.h"
#include "frontend/npy.h"
#include "frontend/serialize.h"
#include "frontend/settings.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/binary_io.h"
#include "runtime/env.h"
#include "runtime/thread_pool.h"

using namespace kiln;
using kiln::test::error_of;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln_files_XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

// A kernel cache of its own (and the user's left alone).
struct TempCacheDir {
  std::string saved = cache_dir();
  TempDir dir;
  TempCacheDir() { set_cache_dir(dir.path); }
  ~TempCacheDir() { set_cache_dir(saved); }
};

double rss_mib() {
  ::malloc_trim(0);
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  REQUIRE(f != nullptr);
  REQUIRE(std::fscanf(f, "%ld %ld", &pages, &resident) == 2);
  std::fclose(f);
  return double(resident) * double(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kRssMeaningful = false;  // freed memory sits in quarantine
#else
constexpr bool kRssMeaningful = true;
#endif

// Bytes no machine that runs this test has: twice its memory and swap, at least 64 GiB.
uint64_t more_than_memory() {
  struct sysinfo si {};
  REQUIRE(::sysinfo(&si) == 0);
  const uint64_t machine = (uint64_t(si.totalram) + si.totalswap) * si.mem_unit;
  return std::max<uint64_t>(uint64_t(64) << 30, 2 * machine);
}

// `head`, then zeros (a hole) up to `size` bytes.
void sparse_file(const std::string& path, const std::string& head, uint64_t size) {
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << head; }
  fs::resize_file(path, size);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Sets an environment variable for a scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* value) : name(n) { ::setenv(n, value, 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

}  // namespace

// ---------------------------------------------------------------- #32.7

TEST_CASE("100,000 grad-mode traced calls keep no custom-call registry entry (#32.7)") {
  Tensor w = randn({4}, TensorOptions().requires_grad(true));
  auto f = jit([&](Tensor x) { return (x * w).sum(); }, "registry");
  Tensor x = randn({4});
  for (int i = 0; i < 100; ++i) (void)f(x);  // warm: compiled, pools settled
  f(x).backward();                           // the taped call's backward runs the backward plan
  const size_t live_warm = autograd::detail::live_custom_calls();
  const double rss_warm = rss_mib();
  for (int i = 0; i < 100000; ++i) {
    Tensor loss = f(x);
    REQUIRE(loss.requires_grad());  // a tape node, so a registered call, every time
  }
  const size_t live_after = autograd::detail::live_custom_calls();
  const double rss_after = rss_mib();
  MESSAGE("100,000 calls: registry " << live_warm << " -> " << live_after << " entries, RSS "
                                     << rss_warm << " -> " << rss_after << " MiB");
  CHECK(live_after <= live_warm);  // the old registry grew by one entry per call
  if (kRssMeaningful) CHECK(rss_after - rss_warm < 4);  // the leak was 256 bytes a call: 24 MiB
}

TEST_CASE("a traced Adam step keeps the registry flat (#32.7)") {
  nn::Linear fc(6, 3);
  optim::Adam opt(fc->parameters(), 1e-3);
  auto step = jit(
      [&](Tensor x, Tensor y) {
        opt.zero_grad();
        Tensor loss = (fc->forward(x) - y).pow(2).mean();
        loss.backward();
        opt.step();
        return loss;
      },
      "adam_step");
  Tensor x = randn({8, 6}), y = randn({8, 3});
  for (int i = 0; i < 20; ++i) (void)step(x, y);
  const size_t live_warm = autograd::detail::live_custom_calls();
  for (int i = 0; i < 2000; ++i) (void)step(x, y);
  CHECK(autograd::detail::live_custom_calls() <= live_warm);
  // And calls made outside any trace: the same.
  Tensor a = randn({3}, TensorOptions().requires_grad(true));
  auto g = jit([](Tensor t) { return t.exp().sum(); }, "exp_sum");
  for (int i = 0; i < 10; ++i) g(a).backward();
  const size_t live = autograd::detail::live_custom_calls();
  for (int i = 0; i < 1000; ++i) g(a).backward();
  CHECK(autograd::detail::live_custom_calls() <= live);
}

// ---------------------------------------------------------------- #32.8

TEST_CASE("a .npy file larger than memory is refused from its header, quickly (#32.8)") {
  TempDir dir;
  const uint64_t huge = more_than_memory();
  const auto t0 = std::chrono::steady_clock::now();

  // Zeros all the way: not a .npy file, said from the first bytes.
  const std::string zeros = dir.path + "/zeros.npy";
  sparse_file(zeros, "", huge);
  KILN_CHECK_ERROR(read_npy(zeros), "zeros.npy: not a NumPy .npy file");

  // A small array's header, then a hole: its data length is wrong.
  Tensor small = tensor({1.f, 2.f, 3.f, 4.f});
  const std::string head = npy_bytes(small).substr(0, npy_bytes(small).size() - 16);
  const std::string padded = dir.path + "/padded.npy";
  sparse_file(padded, head, huge);
  KILN_CHECK_ERROR(read_npy(padded), "padded.npy: damaged: expected exactly 16 bytes of data");

  // A header that claims the whole file as data: the memory it needs is checked
  // before anything is allocated or read.
  const int64_t n = static_cast<int64_t>(huge / 8);
  std::string dict =
      "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
  dict += std::string(64 - (10 + dict.size() + 1) % 64, ' ') + "\n";
  std::string claim = std::string("\x93NUMPY\x01\x00", 8);
  claim += char(dict.size() & 0xff);
  claim += char(dict.size() >> 8);
  claim += dict;
  const std::string big = dir.path + "/big.npy";
  sparse_file(big, claim, claim.size() + uint64_t(n) * 8);
  const std::string needs = "needs " + std::to_string(uint64_t(n) * 8) + " bytes";
  KILN_CHECK_ERROR(read_npy(big), "out of CPU memory", "big.npy", needs.c_str());

  // A header length past what any .npy has.
  std::string long_header =
      std::string("\x93NUMPY\x02\x00", 8) + std::string("\x00\x00\x00\x40", 4);
  const std::string lh = dir.path + "/long_header.npy";
  sparse_file(lh, long_header, huge);
  KILN_CHECK_ERROR(read_npy(lh),
                   "long_header.npy: damaged: the header says it is 1073741824 bytes");

  const double s = seconds_since(t0);
  MESSAGE("four .npy files of " << huge / (1 << 30) << " GiB refused in " << s << " s");
  CHECK(s < 5);  // reading them took minutes (or threw std::bad_alloc)

  // A normal file still reads, and parse_npy agrees.
  const std::string ok = dir.path + "/ok.npy";
  write_npy(ok, small);
  CHECK(read_npy(ok).to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(parse_npy(npy_bytes(small), "mem").to_vector<float>() == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("saved graphs and weights larger than memory are refused from their header (#32.8)") {
  TempDir dir;
  const uint64_t huge = more_than_memory();
  auto f = jit([](Tensor x) { return x.exp().sum(); }, "g");
  Tensor x = randn({3});
  const std::string good = dir.path + "/good.kiln";
  save_graph(good, f.graph(x, false), {});
  const std::string bytes = io::read_file(good);
  const auto t0 = std::chrono::steady_clock::now();

  const std::string zeros = dir.path + "/zeros.kiln";
  sparse_file(zeros, "", huge);
  KILN_CHECK_ERROR(load_graph(zeros), "zeros.kiln: not a Kiln graph file");

  // A whole, valid file followed by a hole.
  const std::string grown = dir.path + "/grown.kiln";
  sparse_file(grown, bytes, huge);
  const std::string extra = std::to_string(huge - bytes.size()) + " unexpected bytes after the end";
  KILN_CHECK_ERROR(load_graph(grown), "grown.kiln: damaged: ", extra.c_str());

  // A header that declares the whole (sparse) size: the memory is checked first.
  std::string head = bytes.substr(0, 11 + 4 + 8 + 4);
  for (int i = 0; i < 8; ++i) head[15 + i] = char((huge >> (8 * i)) & 0xff);
  const std::string claims = dir.path + "/claims.kiln";
  sparse_file(claims, head, huge);
  KILN_CHECK_ERROR(load_graph(claims), "out of CPU memory", "claims.kiln");

  // The weights format shares the reader.
  nn::Linear fc(2, 2);
  const std::string w = dir.path + "/w.kiln";
  sparse_file(w, "", huge);
  KILN_CHECK_ERROR(load(fc, w), "w.kiln: not a Kiln weights file");

  const double s = seconds_since(t0);
  MESSAGE("four files of " << huge / (1 << 30) << " GiB refused in " << s << " s");
  CHECK(s < 5);
  CHECK(load_graph(good).graph.args().size() == 1);  // a good file still loads
}

TEST_CASE(
    "a kernel-cache entry larger than memory is a damaged entry: the call recompiles (#32.8)") {
  TempCacheDir cache;
  auto f = jit([](Tensor x) { return (x * 3).exp(); }, "cached");
  Tensor x = randn({16});
  const Tensor want = f(x);
  wait_for_background_compiles();    // the optimised objects, on disk
  settings().reuse_kernels = false;  // the next function reads the disk cache
  int entries = 0;
  for (const auto& e : fs::directory_iterator(cache.dir.path)) {
    fs::resize_file(e.path(), more_than_memory());  // its header stays, the rest is a hole
    ++entries;
  }
  CHECK(entries >= 1);
  auto g = jit([](Tensor x) { return (x * 3).exp(); }, "cached_again");
  Tensor got;
  CHECK_NOTHROW(got = g(x));
  settings().reuse_kernels = true;
  CHECK(got.to_vector<float>() == want.to_vector<float>());
  wait_for_background_compiles();  // the recompiled objects, on disk
  for (const auto& e : fs::directory_iterator(cache.dir.path))
    CHECK(fs::file_size(e.path()) < (uint64_t(1) << 20));  // rewritten by the recompile
}

// ---------------------------------------------------------------- #32.10

TEST_CASE("atomic writes replace regular files only (#32.10)") {
  TempDir dir;
  Tensor t = tensor({1.f, 2.f});
  const std::string fifo = dir.path + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of([&] { write_npy(fifo, t); }) ==
        fifo +
            ": is a FIFO; only a regular file is replaced (expected a regular file or a new path)");
  CHECK(fs::is_fifo(fifo));
  CHECK(error_of([&] {
          write_npy("/dev/null", t);
        }).starts_with("/dev/null: is a character device; only a regular file is replaced"));
  CHECK(error_of([&] {
          write_npy(dir.path, t);
        }).starts_with(dir.path + ": is a directory; only a regular file is replaced"));
  // Every writer goes through the one rule: saved graphs, weights, dumps.
  auto f = jit([](Tensor x) { return x + 1; }, "w");
  KILN_CHECK_ERROR(save_graph(fifo, f.graph(t, false), {}),
                   "is a FIFO; only a regular file is replaced");
  nn::Linear fc(2, 2);
  KILN_CHECK_ERROR(save(fc, fifo), "is a FIFO; only a regular file is replaced");
  const std::string dangling = dir.path + "/dangling";
  fs::create_symlink(dir.path + "/nowhere", dangling);
  KILN_CHECK_ERROR(write_npy(dangling, t), "is a symbolic link to a missing file");
  CHECK_FALSE(fs::exists(dir.path + "/nowhere"));
  const std::string to_fifo = dir.path + "/to_fifo";
  fs::create_symlink(fifo, to_fifo);
  KILN_CHECK_ERROR(write_npy(to_fifo, t), "is a symbolic link to a FIFO");

  // A link to a regular file stays a link; the file it names is replaced, and a
  // replaced file keeps its permissions.
  const std::string real = dir.path + "/real.npy", link = dir.path + "/link.npy";
  write_npy(real, tensor({9.f}));
  ::chmod(real.c_str(), 0600);
  fs::create_symlink(real, link);
  write_npy(link, t);
  CHECK(fs::is_symlink(link));
  CHECK(read_npy(real).to_vector<float>() == std::vector<float>{1, 2});
  struct stat st {};
  REQUIRE(::stat(real.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  for (const auto& e : fs::directory_iterator(dir.path))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("temporary files left by killed writes are removed by the next write there (#32.10)") {
  TempDir dir;
  // A pid above any pid_max is never alive; pid 1 always is.
  const std::string stale = dir.path + "/out.npy.tmp.2147483647.0";
  const std::string stale_other = dir.path + "/model.kiln.tmp.2147483646.17";
  const std::string fresh_dead = dir.path + "/x.npy.tmp.2147483645.3";
  const std::string live = dir.path + "/y.npy.tmp.1.0";
  const std::string not_ours = dir.path + "/notes.tmp.txt";
  for (const std::string& p : {stale, stale_other, fresh_dead, live, not_ours})
    std::ofstream(p) << "partial";
  // Untouched for an hour, except fresh_dead (a write of another pid namespace may
  // be in progress there).
  const struct timeval old[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  for (const std::string& p : {stale, stale_other, live, not_ours})
    REQUIRE(::utimes(p.c_str(), old) == 0);
  write_npy(dir.path + "/out.npy", tensor({1.f}));
  CHECK_FALSE(fs::exists(stale));
  CHECK_FALSE(fs::exists(stale_other));
  CHECK(fs::exists(fresh_dead));
  CHECK(fs::exists(live));
  CHECK(fs::exists(not_ours));
  CHECK(read_npy(dir.path + "/out.npy").to_vector<float>() == std::vector<float>{1});
}

// ---------------------------------------------------------------- smaller

TEST_CASE("data_ptr inside a trace names the line (#32 smaller)") {
  auto f = jit([](Tensor x) {
    (void)x.data_ptr<float>();  // the line the error names
    return x;
  });
  const int line = __LINE__ - 3;
  const std::string msg = error_of([&] { (void)f(tensor({1.f})); });
  CHECK(msg.find("data_ptr() reads a tensor's data") != std::string::npos);
  CHECK(msg.find("files_robust_test.cpp:" + std::to_string(line)) != std::string::npos);
  KILN_CHECK_ERROR(Tensor().data_ptr<float>(), "data_ptr() on an undefined tensor",
                   "files_robust_test.cpp");
  KILN_CHECK_ERROR(tensor({1.f}).data_ptr<double>(), "data_ptr<f64>() on a tensor of type f32",
                   "files_robust_test.cpp");
  auto g = jit([](Tensor x) {
    write_npy("/nonexistent/never.npy", x);
    return x;
  });
  KILN_CHECK_ERROR(g(tensor({1.f})), "write_npy: the tensor is symbolic", "files_robust_test.cpp");
}

TEST_CASE("logsumexp over an empty dim is -inf, as in PyTorch (#32 smaller)") {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = randn({0, 3});
  Tensor r = x.logsumexp(0);
  CHECK(r.sizes() == Shape{3});
  CHECK(r.to_vector<float>() == std::vector<float>{-inf, -inf, -inf});
  CHECK(x.logsumexp(1).sizes() == Shape{0});
  CHECK(x.logsumexp(std::vector<int64_t>{0, 1}).item<float>() == -inf);
  CHECK(x.logsumexp(0, true).sizes() == Shape{1, 3});
  auto f = jit([](Tensor t) { return t.logsumexp(0); });
  CHECK(f(x).to_vector<float>() == std::vector<float>{-inf, -inf, -inf});
  Tensor w = randn({0, 2}, TensorOptions(kFloat64).requires_grad(true));
  w.logsumexp(0).sum().backward();
  CHECK(w.grad().sizes() == Shape{0, 2});
  // Non-empty input is unchanged: the max shift still guards against overflow.
  CHECK(tensor({1000.f, 1000.f}).logsumexp(0).item<float>() ==
        doctest::Approx(1000 + std::log(2.0)));
}

TEST_CASE("a DType that is not one of the five is refused everywhere (#32 smaller)") {
  const DType bad = static_cast<DType>(17);
  Tensor x = tensor({1.f, 2.f});
  KILN_CHECK_ERROR(x.to(bad), "to(): expected a dtype (bool, u8, i8, i16, i32, i64, f32 or f64), got DType(17)",
                   "files_robust_test.cpp");
  KILN_CHECK_ERROR(zeros({2}, TensorOptions(bad)), "expected a dtype", "DType(17)");
  KILN_CHECK_ERROR(full({2}, 1, TensorOptions(bad)), "expected a dtype");
  KILN_CHECK_ERROR(tensor({1, 2}, TensorOptions(bad)), "expected a dtype");
  KILN_CHECK_ERROR(arange(3, TensorOptions(bad)), "expected a dtype");
  KILN_CHECK_ERROR(linspace(0, 1, 3, TensorOptions(bad)), "expected a dtype");
  KILN_CHECK_ERROR(eye(2, TensorOptions(bad)), "expected a dtype");
  KILN_CHECK_ERROR(from_blob(&x, {1}, TensorOptions(bad)), "expected a dtype");
  KILN_CHECK_ERROR(randint(0, 5, {2}, TensorOptions(bad)), "expected a dtype");
  KILN_CHECK_ERROR(randperm(3, TensorOptions(bad)), "expected a dtype");
  CHECK_FALSE(error_of([&] { (void)rand({2}, TensorOptions(bad)); }).empty());
  data::CsvOptions co;
  co.dtype = bad;
  KILN_CHECK_ERROR(data::parse_csv("1,2\n", "t.csv", co), "t.csv: CsvOptions::dtype", "DType(17)");
  auto f = jit([&](Tensor t) { return t.to(bad); });
  KILN_CHECK_ERROR(f(x), "expected a dtype", "DType(17)");
}

TEST_CASE("a graph whose types could not exist is refused when it is loaded (#32 smaller)") {
  // f32[2^62,4]: 2^64 elements.
  const std::string text =
      "%0 = arg {index=0} : f32[4611686018427387904,4]\n%1 = exp %0 : f32[4611686018427387904,4]\n"
      "return %1\n";
  KILN_CHECK_ERROR(parse_graph(text, "g.kir"), "g.kir:1:", "type f32[4611686018427387904,4]",
                   "does not fit in 64 bits");
  // Zero elements but strides past 64 bits.
  KILN_CHECK_ERROR(
      parse_graph("%0 = arg {index=0} : f32[0,4611686018427387904,8]\nreturn %0\n", "h"),
      "does not fit in 64 bits");
  CHECK_NOTHROW(parse_graph("%0 = arg {index=0} : f32[0,4]\nreturn %0\n", "ok"));

  // Through a saved graph: the same file with the type changed is refused by load_graph.
  TempDir dir;
  auto f = jit([](Tensor x) { return x.exp(); }, "g");
  Graph g = f.graph(randn({2, 4}), false);
  std::string ir = print_graph(g);
  for (size_t p = ir.find("f32[2,4]"); p != std::string::npos; p = ir.find("f32[2,4]", p))
    ir.replace(p, 8, "f32[4611686018427387904,4]");
  io::ByteWriter w;
  const io::FrameFormat fmt{"KILN-GRAPH\n", kGraphFormatVersion, "Kiln graph file",
                            "section count"};
  io::begin_frame(w, fmt, 1);
  w.bytes("GRPH", 4);
  w.u64(ir.size());
  w.bytes(ir);
  io::end_frame(w, fmt);
  const std::string path = dir.path + "/huge_type.kiln";
  io::write_file_durable(path, w.str());
  KILN_CHECK_ERROR(load_graph(path), "huge_type.kiln: the graph section",
                   "type f32[4611686018427387904,4]", "does not fit in 64 bits");
}

TEST_CASE("switch values are parsed strictly, naming the switch (#32 smaller)") {
  {
    ScopedEnv e("KILN_TEST_SWITCH", "flase");
    CHECK(error_of([] { (void)env::flag("KILN_TEST_SWITCH", true); }) ==
          "KILN_TEST_SWITCH=flase: expected 1, true, on or yes, or 0, false, off or no (unset it "
          "for the default)");
  }
  for (const char* v : {"1", "TRUE", "on", "Yes"}) {
    ScopedEnv e("KILN_TEST_SWITCH", v);
    CHECK(env::flag("KILN_TEST_SWITCH", false));
  }
  for (const char* v : {"0", "false", "OFF", "no"}) {
    ScopedEnv e("KILN_TEST_SWITCH", v);
    CHECK_FALSE(env::flag("KILN_TEST_SWITCH", true));
  }
  CHECK(env::flag("KILN_TEST_SWITCH", true));  // unset: the default
  for (const char* v : {"100000", "0", "-3", "4x", "x", "99999999999999999999", " 8"}) {
    ScopedEnv e("KILN_TEST_SWITCH", v);
    CHECK(error_of([] { (void)env::integer("KILN_TEST_SWITCH", 1, 1024, 4); }) ==
          std::string("KILN_TEST_SWITCH=") + v +
              ": expected a whole number from 1 to 1024 (unset it for the default)");
  }
  {
    ScopedEnv e("KILN_TEST_SWITCH", "12");
    CHECK(env::integer("KILN_TEST_SWITCH", 1, 1024, 4) == 12);
  }
  {
    ScopedEnv e("KILN_TEST_SWITCH", "fastest");
    CHECK(error_of([] {
            (void)env::choice("KILN_TEST_SWITCH", {"auto", "im2col", "direct"}, 0);
          }) ==
          "KILN_TEST_SWITCH=fastest: expected 'auto', 'im2col' or 'direct' (unset it for the "
          "default)");
  }
  {
    ScopedEnv e("KILN_TEST_SWITCH", "direct");
    CHECK(env::choice("KILN_TEST_SWITCH", {"auto", "im2col", "direct"}, 0) == 2);
  }
  // A thread count the pool cannot have is refused by the API as by the switch.
  KILN_CHECK_ERROR(set_num_threads(100000),
                   "set_num_threads: expected 1 to 1024 threads, got 100000");
  KILN_CHECK_ERROR(set_num_threads(0), "set_num_threads: expected 1 to 1024 threads, got 0");
}
