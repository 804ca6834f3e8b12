// The `kiln` command line as a user runs it: a graph saved here is run,
// explained and dumped by the built binary; exit codes and messages checked.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kiln/kiln.h>

#include "frontend/npy.h"
#include "frontend/serialize.h"
#include "frontend/tensor_impl.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `kiln <args>` in `dir` through the shell, with `env` ("NAME=value ...") set.
Result kiln_cli(const std::string& args, const std::string& dir, const std::string& env = "") {
  std::string cmd = "cd '" + dir + "' && " + env + " '" KILN_CLI_PATH "' " + args + " 2>&1";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  size_t n = static_cast<size_t>(a.numel()) * dtype_size(a.dtype());
  Tensor x = a.contiguous(), y = b.contiguous();
  return n == 0 || std::memcmp(x.impl()->view().data, y.impl()->view().data, n) == 0;
}

bool contains(const std::string& s, const std::string& piece) {
  return s.find(piece) != std::string::npos;
}

// A saved two-input, two-output model with its inputs and the traced function's outputs.
struct Fixture {
  std::string dir;
  std::vector<Tensor> want;
  Fixture() {
    dir = (fs::temp_directory_path() / ("kiln_cli_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    manual_seed(21);
    Tensor w = randn({8, 6}), b = randn({6});
    auto f = jit(
        [&](Tensor x, Tensor y) {
          Tensor h = (x.matmul(w) + b).sigmoid() * y;
          return std::make_tuple(h.softmax(1), h.sum(0));
        },
        "model");
    Tensor x = randn({4, 8}), y = randn({4, 6});
    auto [p, s] = f(x, y);
    want = {p, s};
    save_graph(dir + "/model.kiln", f.graph(x, y, false), {w, b}, {"model"});
    write_npy(dir + "/x.npy", x);
    write_npy(dir + "/y.npy", y);
  }
  ~Fixture() { fs::remove_all(dir); }
};

}  // namespace

TEST_CASE("cli: --help and usage errors") {
  Fixture fx;
  Result help = kiln_cli("--help", fx.dir);
  CHECK(help.code == 0);
  CHECK(contains(help.out, "run"));
  CHECK(contains(help.out, "explain"));
  CHECK(contains(help.out, "dump"));
  CHECK(kiln_cli("run --help", fx.dir).code == 0);

  Result bad = kiln_cli("run model.kiln --no-such-option", fx.dir);
  CHECK(bad.code == 2);
  CHECK(contains(bad.out, "kiln: error:"));
  CHECK(kiln_cli("", fx.dir).code == 2);                 // no subcommand
  CHECK(kiln_cli("frobnicate", fx.dir).code == 2);       // unknown subcommand
  CHECK(kiln_cli("dump model.kiln", fx.dir).code == 2);  // --dir is required
  CHECK(kiln_cli("run model.kiln -i x.npy -i y.npy -o a.npy --output-dir d", fx.dir).code == 2);
}

TEST_CASE("cli: run writes .npy outputs equal to the traced function's") {
  Fixture fx;
  Result r = kiln_cli("run model.kiln --input x.npy --input y.npy --output-dir outs", fx.dir);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "output 0: f32[4,6] -> outs/out0.npy"));
  CHECK(contains(r.out, "output 1: f32[6]"));
  CHECK(same_bytes(read_npy(fx.dir + "/outs/out0.npy"), fx.want[0]));
  CHECK(same_bytes(read_npy(fx.dir + "/outs/out1.npy"), fx.want[1]));

  r = kiln_cli("run model.kiln -i x.npy -i y.npy --output p.npy --output s.npy", fx.dir);
  REQUIRE(r.code == 0);
  CHECK(same_bytes(read_npy(fx.dir + "/p.npy"), fx.want[0]));
  CHECK(same_bytes(read_npy(fx.dir + "/s.npy"), fx.want[1]));

  r = kiln_cli("run model.kiln -i x.npy -i y.npy", fx.dir);
  REQUIRE(r.code == 0);
  CHECK(same_bytes(read_npy(fx.dir + "/out1.npy"), fx.want[1]));
}

TEST_CASE("cli: runtime errors exit 1 with a message on stderr") {
  Fixture fx;
  Result r = kiln_cli("run missing.kiln -i x.npy", fx.dir);
  CHECK(r.code == 1);
  CHECK(contains(r.out, "kiln: error: missing.kiln: cannot open"));

  r = kiln_cli("run model.kiln -i x.npy", fx.dir);
  CHECK(r.code == 1);
  CHECK(contains(r.out, "takes 2 arguments (f32[4,8], f32[4,6]), got 1 --input file"));

  r = kiln_cli("run model.kiln -i y.npy -i x.npy", fx.dir);
  CHECK(r.code == 1);
  CHECK(contains(r.out, "y.npy (--input 0) is f32[4,6], the graph's argument 0 is f32[4,8]"));

  // Device files, as the graph or as an input, are refused, not read forever.
  for (const char* args :
       {"run /dev/zero -i x.npy", "run model.kiln -i /dev/zero -i x.npy", "explain /dev/zero"}) {
    CAPTURE(args);
    r = kiln_cli(args, fx.dir);
    CHECK(r.code == 1);
    CHECK(contains(r.out, "/dev/zero: is a character device (expected a regular file)"));
  }

  std::string bytes;
  {
    std::ifstream in(fx.dir + "/model.kiln", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 1;
  std::ofstream(fx.dir + "/damaged.kiln", std::ios::binary) << bytes;
  r = kiln_cli("explain damaged.kiln", fx.dir);
  CHECK(r.code == 1);
  CHECK(contains(r.out, "damaged.kiln: checksum mismatch (file damaged)"));
}

TEST_CASE("cli: -o writes regular files only, checked before the graph runs (#32.10)") {
  Fixture fx;
  REQUIRE(::mkfifo((fx.dir + "/fifo").c_str(), 0600) == 0);
  Result r = kiln_cli("run model.kiln -i x.npy -i y.npy -o p.npy -o fifo", fx.dir);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(contains(r.out,
                 "kiln: error: fifo: is a FIFO; only a regular file is replaced (expected a "
                 "regular file or a new path)"));
  CHECK(fs::is_fifo(fx.dir + "/fifo"));
  CHECK_FALSE(fs::exists(fx.dir + "/p.npy"));  // refused before anything ran or was written
  r = kiln_cli("run model.kiln -i x.npy -i y.npy -o /dev/null -o s.npy", fx.dir);
  CHECK(r.code == 1);
  CHECK(contains(r.out, "/dev/null: is a character device; only a regular file is replaced"));
  r = kiln_cli("run model.kiln -i x.npy -i y.npy --output-dir fifo", fx.dir);
  CHECK(r.code == 1);
  // A stale temporary file of a killed write is gone after the next write there.
  std::ofstream(fx.dir + "/p.npy.tmp.2147483647.0") << "partial";
  fs::last_write_time(fx.dir + "/p.npy.tmp.2147483647.0",
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  r = kiln_cli("run model.kiln -i x.npy -i y.npy -o p.npy -o s.npy", fx.dir);
  REQUIRE(r.code == 0);
  CHECK(same_bytes(read_npy(fx.dir + "/p.npy"), fx.want[0]));
  CHECK_FALSE(fs::exists(fx.dir + "/p.npy.tmp.2147483647.0"));
}

TEST_CASE("cli: a bad switch value is an error naming the switch (#32 smaller)") {
  Fixture fx;
  const std::pair<const char*, const char*> cases[] = {
      {"KILN_NUM_THREADS=100000",
       "KILN_NUM_THREADS=100000: expected a whole number from 1 to 1024"},
      {"KILN_NUM_THREADS=four", "KILN_NUM_THREADS=four: expected a whole number from 1 to 1024"},
      {"KILN_JIT=flase", "KILN_JIT=flase: expected 1, true, on or yes, or 0, false, off or no"},
      {"KILN_FUSION=2", "KILN_FUSION=2: expected 1, true"},
      {"KILN_CPU_CACHE_MB=lots", "KILN_CPU_CACHE_MB=lots: expected a whole number from 0 to"},
      {"KILN_OPT=fastest", "KILN_OPT=fastest: expected 'fast' or 'full'"},
      {"KILN_CONV=fft", "KILN_CONV=fft: expected 'auto', 'im2col' or 'direct'"},
      {"KILN_LOG=recompile", "KILN_LOG=recompile: unknown category 'recompile'"},
  };
  for (const auto& [env, message] : cases) {
    CAPTURE(env);
    Result r = kiln_cli("run model.kiln -i x.npy -i y.npy -o p.npy -o s.npy", fx.dir);
    REQUIRE(r.code == 0);
    r = kiln_cli(std::string("run model.kiln -i x.npy -i y.npy -o p.npy -o s.npy"), fx.dir,
                 std::string(env));
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK(contains(r.out, std::string("kiln: error: ") + message));
  }
  Result r = kiln_cli("run model.kiln -i x.npy -i y.npy -o p.npy -o s.npy", fx.dir,
                      "KILN_NUM_THREADS=3 KILN_JIT=off KILN_LOG=recompiles,compile");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(same_bytes(read_npy(fx.dir + "/p.npy"), fx.want[0]));
}

TEST_CASE("cli: explain shows passes and kernels, fused against unfused") {
  Fixture fx;
  Result r = kiln_cli("explain model.kiln --no-color", fx.dir);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(!contains(r.out, "\033["));
  CHECK(contains(r.out, "passes"));
  CHECK(contains(r.out, "simplify"));
  std::smatch m_fused, m_unfused;
  REQUIRE(std::regex_search(r.out, m_fused, std::regex("\nfused kernels \\((\\d+) kernels\\)")));
  REQUIRE(std::regex_search(r.out, m_unfused, std::regex("unfused kernels \\((\\d+) kernels\\)")));
  int fused = std::stoi(m_fused[1]), unfused = std::stoi(m_unfused[1]);
  CHECK(fused >= 1);
  CHECK(unfused > fused);
  CHECK(std::regex_search(r.out, std::regex("kernels +" + std::to_string(fused) + " +" +
                                            std::to_string(unfused) + " ")));
  CHECK(contains(r.out, "bytes moved"));
}

TEST_CASE("cli: dump writes every artefact, fused and unfused") {
  Fixture fx;
  for (const char* flag : {"", " --no-fusion"}) {
    std::string d = std::string("dump") + (*flag ? "-unfused" : "-fused");
    Result r = kiln_cli("dump model.kiln --dir " + d + flag, fx.dir);
    INFO(r.out);
    REQUIRE(r.code == 0);
    bool summary = false, kernel_ir = false, assembly = false;
    for (const auto& e : fs::recursive_directory_iterator(fx.dir + "/" + d)) {
      summary = summary || e.path().filename() == "summary.txt";
      kernel_ir = kernel_ir || e.path().extension() == ".kir";
      assembly = assembly || e.path().extension() == ".s";
    }
    CHECK(summary);
    CHECK(kernel_ir);
    CHECK(assembly);
  }
}

}  // namespace kiln
