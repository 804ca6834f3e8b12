// Traced functions whose inputs are on a CUDA device: the plan's groups become
// NVRTC kernels and cuBLAS steps, results match the CPU plan, training steps
// update parameters on the device, and dumps hold the CUDA C and PTX. Each
// test skips without a GPU.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "cuda_device_util.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("a traced function on CUDA fuses and matches the CPU, fused and unfused") {
  KILN_REQUIRE_GPU();
  manual_seed(10);
  Tensor x = randn({64, 300});
  auto f = jit([](Tensor x) {
    Tensor y = (x * 2 + 1).tanh();
    return std::vector<Tensor>{y.softmax(1), (y * y).sum(1), y.t() + 1};
  });
  std::vector<Tensor> cpu = f(x);
  std::vector<Tensor> gpu = f(x.cuda());
  REQUIRE(gpu.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(gpu[i].is_cuda());
    CHECK(close(gpu[i], cpu[i], 1e-4, 1e-5));
  }
  CHECK(f.stats().misses == 2);  // one signature per device
  (void)f(x.cuda());
  CHECK(f.stats().misses == 2);
  CHECK(f.stats().miss_reasons.back().find("device cpu -> cuda:0") != std::string::npos);

  f.set_fusion(false);
  std::vector<Tensor> unfused = f(x.cuda());
  for (size_t i = 0; i < 3; ++i) CHECK(close(unfused[i], cpu[i], 1e-4, 1e-5));
}

TEST_CASE("matmul with bias and ReLU compiles to one cuBLASLt call on CUDA") {
  KILN_REQUIRE_CUBLAS();
  manual_seed(11);
  Tensor w1 = randn({30, 20}), b1 = randn({20}), w2 = randn({20, 5}), b2 = randn({5});
  Tensor gw1 = w1.cuda(), gb1 = b1.cuda(), gw2 = w2.cuda(), gb2 = b2.cuda();
  auto mlp_cpu = jit([&](Tensor x) { return ((x.matmul(w1) + b1).relu().matmul(w2) + b2).sum(1); });
  auto mlp_gpu = jit(
      [&](Tensor x) { return ((x.matmul(gw1) + gb1).relu().matmul(gw2) + gb2).sum(1); }, "mlp_gpu");
  Tensor x = randn({16, 30});
  CHECK(close(mlp_gpu(x.cuda()), mlp_cpu(x), 1e-4, 1e-4));
  auto hidden = jit([&](Tensor x) { return (x.matmul(gw1.t().t()) + gb1).relu(); }, "hidden");
  CHECK(close(hidden(x.cuda()), (x.matmul(w1) + b1).relu(), 1e-4, 1e-4));

  fs::path dir = fs::temp_directory_path() / ("kiln_gpu_dump_" + std::to_string(::getpid()));
  mlp_gpu.dump(dir.string(), x.cuda());
  fs::path root;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == "summary.txt") root = e.path().parent_path();
  REQUIRE(!root.empty());
  std::string summary = read_file(root / "summary.txt");
  CHECK(summary.find("_gemm_lt") != std::string::npos);
  CHECK(summary.find("target cuda:0") != std::string::npos);
  int cu = 0, ptx = 0;
  for (auto& e : fs::directory_iterator(root / "kernels")) {
    cu += e.path().extension() == ".cu";
    ptx += e.path().extension() == ".ptx";
    if (e.path().extension() == ".ptx")
      CHECK(read_file(e.path()).find(".entry") != std::string::npos);
  }
  CHECK(cu >= 1);
  CHECK(ptx == cu);
  fs::remove_all(dir);
}

TEST_CASE("a traced training step on CUDA updates its parameters like the CPU one") {
  KILN_REQUIRE_CUBLAS();
  manual_seed(12);
  Tensor w0 = randn({8, 4}) * 0.1, x = randn({32, 8}), y = randn({32, 4});
  auto train = [&](Tensor w, Tensor x, Tensor y) {
    optim::SGD opt({w}, 0.1);
    auto step = jit([&](Tensor in, Tensor target) {
      opt.zero_grad();
      Tensor loss = (in.matmul(w) - target).pow(2).mean();
      loss.backward();
      opt.step();
      return loss;
    });
    std::vector<float> losses;
    for (int i = 0; i < 5; ++i) losses.push_back(step(x, y).item<float>());
    CHECK(step.stats().misses <= 2);
    return losses;
  };
  Tensor w = w0.clone().requires_grad_();
  Tensor gw = w0.cuda().requires_grad_();
  std::vector<float> cpu = train(w, x, y), gpu = train(gw, x.cuda(), y.cuda());
  for (size_t i = 0; i < cpu.size(); ++i) CHECK(gpu[i] == doctest::Approx(cpu[i]).epsilon(1e-4));
  CHECK(gw.is_cuda());
  CHECK(close(gw, w, 1e-4, 1e-5));
}

TEST_CASE("a traced CUDA function called eagerly with grad gives the CPU's gradients") {
  KILN_REQUIRE_GPU();
  manual_seed(13);
  auto f = jit([](Tensor x) { return (x.exp() * x).sum(); });
  Tensor x0 = randn({10, 6});
  Tensor x = x0.clone().requires_grad_(), gx = x0.cuda().requires_grad_();
  f(x).backward();
  f(gx).backward();
  REQUIRE(gx.grad().defined());
  CHECK(close(gx.grad(), x.grad(), 1e-4, 1e-5));
}

TEST_CASE("mixing devices in a traced function is an error naming the line") {
  KILN_REQUIRE_GPU();
  Tensor gw = randn({3}).cuda();
  auto f = jit([&](Tensor x) { return x + gw; });
  KILN_CHECK_ERROR(f(randn({3})), "expected all operands on one device", "cuda:0");
  Tensor a = randn({3});
  CHECK(close(f(a.cuda()), a + gw.cpu()));
}
