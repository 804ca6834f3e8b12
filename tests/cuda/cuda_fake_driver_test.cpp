// The host side of the CUDA path against a fake driver (tests/cuda/fake): the
// loader resolves it through cuGetProcAddress, tensors move to and from
// "device" memory (host memory here), the caching allocator reuses blocks,
// eager ops and traced functions compile with NVRTC for the fake sm_90,
// load and launch. Kernels do not run, so only what the host does is checked.
// On a machine with a real driver this test is skipped (the real tests run).
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/cuda_backend.h"
#include "cuda_device_util.h"
#include "frontend/device_ops.h"
#include "runtime/allocator.h"
#include "runtime/collective.h"
#include "runtime/storage.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

#ifdef KILN_FAKE_CUDA_PATH

namespace {

/// Why the fake-driver cases cannot run here, or empty: a real driver is
/// present (`covered_by` says which tests run instead), or the build has no NVRTC.
std::string skip_reason(const std::string& covered_by) {
  if (cuda::available()) return "a real driver is present (" + covered_by + ")";
  if (nvrtc_version().empty()) return "this build has no NVRTC";
  return {};
}

struct FakeDriver {
  FakeDriver() { cuda::reload_driver_for_testing(KILN_FAKE_CUDA_PATH); }
  ~FakeDriver() {
    cuda_empty_cache(0);  // the fake's blocks are host memory: never hand them to a real device
    cuda::reload_driver_for_testing("");
  }
  void* symbol(const char* name) const {
    void* h = ::dlopen(KILN_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
    void* f = h ? ::dlsym(h, name) : nullptr;
    if (h) ::dlclose(h);
    return f;
  }
  int launches() const {
    auto f = reinterpret_cast<int (*)()>(symbol("kiln_fake_launches"));
    return f ? f() : -1;
  }
  std::string last_function() const {
    return reinterpret_cast<const char* (*)()>(symbol("kiln_fake_last_function"))();
  }
  struct Launch {
    void* table[4];
    long long begin, end;
    int grid, block;
  };
  Launch last() const {
    Launch l{};
    reinterpret_cast<void (*)(void**, long long*, long long*)>(symbol("kiln_fake_last_kernel"))(
        l.table, &l.begin, &l.end);
    l.grid = reinterpret_cast<int (*)()>(symbol("kiln_fake_last_grid"))();
    l.block = reinterpret_cast<int (*)()>(symbol("kiln_fake_last_block"))();
    return l;
  }
};

}  // namespace

TEST_CASE("with a fake driver, the host side of the CUDA path runs") {
  if (const std::string why = skip_reason("the GPU tests cover this"); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  FakeDriver fake;
  REQUIRE_MESSAGE(cuda::available(), cuda::unavailable_reason());
  CHECK(cuda::device_count() == 1);
  CHECK(cuda::device_info(0).name == "Kiln fake GPU");
  CHECK(cuda::device_info(0).arch() == 90);
  CHECK(cuda::device_info(0).str().find("sm_90, 4 SMs") != std::string::npos);
  for (const auto& e : cuda::driver_entry_points()) CHECK_MESSAGE(e.resolved, e.name);
  KILN_CHECK_ERROR(cuda::require("x", 1), "cuda:1 does not exist (1 CUDA device found)");

  // Transfers: data goes to "device" memory and back, views included.
  manual_seed(1);
  Tensor x = randn({5, 7});
  Tensor g = x.cuda();
  CHECK(g.is_cuda());
  CHECK(equal(g.cpu(), x));
  CHECK(equal(x.t().cuda().cpu(), x.t().contiguous()));
  CHECK(g[2][3].item<float>() == x[2][3].item<float>());
  CHECK(g.to_vector<float>() == x.to_vector<float>());
  CHECK(x.cuda().str().find("device='cuda:0'") != std::string::npos);
  KILN_CHECK_ERROR(g + x, "expected all operands on one device");
  // As in PyTorch, a 0-dim CPU tensor joins an elementwise op on the GPU as a
  // number would (copied there first); a CPU tensor with dims still does not.
  const Tensor two = full({}, 2.0);
  for (const Tensor& r : {g * two, two - g, where(g > two, g, two)}) {
    CHECK(r.is_cuda());
    CHECK(r.sizes() == g.sizes());
  }
  KILN_CHECK_ERROR(g + tensor({2.f}), "expected all operands on one device");
  // Traced too: a 0-dim literal of the body is built again on the GPU.
  const Tensor traced_scaled = jit([](Tensor a) { return a * full({}, 2.0); })(g);
  CHECK(traced_scaled.is_cuda());
  CHECK(traced_scaled.sizes() == g.sizes());

  // The caching allocator hands freed blocks out again.
  AllocatorStats s0 = cuda_allocator_stats(0);
  for (int i = 0; i < 10; ++i) (void)Storage::allocate(4000, Device(kCUDA));
  AllocatorStats s1 = cuda_allocator_stats(0);
  CHECK(s1.cache_hits >= s0.cache_hits + 9);
  CHECK(s1.bytes_in_use == s0.bytes_in_use);

  // Eager ops: one generated kernel each, compiled once per signature.
  int n0 = fake.launches();
  REQUIRE(n0 >= 0);
  Tensor y = g.exp();
  CHECK(y.is_cuda());
  CHECK(y.sizes() == Shape{5, 7});
  CHECK(fake.launches() == n0 + 1);
  // The kernel's buffer table (uploaded to the device) holds the result and the operand.
  FakeDriver::Launch l = fake.last();
  CHECK(l.begin == 0);
  CHECK(l.end == 35);
  CHECK(l.block == 256);
  CHECK(l.grid == 1);
  std::vector<void*> table(l.table, l.table + 2);
  CHECK(std::count(table.begin(), table.end(), static_cast<void*>(y.data_ptr<float>())) == 1);
  CHECK(std::count(table.begin(), table.end(), static_cast<void*>(g.data_ptr<float>())) == 1);
  EagerCudaStats e0 = eager_cuda_stats();
  (void)g.exp();
  CHECK(eager_cuda_stats().compiled == e0.compiled);
  CHECK(eager_cuda_stats().hits == e0.hits + 1);
  (void)(g.t() + 1);                 // a permuted operand: a permute node, still one kernel
  CHECK(fake.launches() == n0 + 4);  // exp, the constant 1, the add
  (void)g.t().contiguous();          // a strided copy: the hand-written kernel
  CHECK(fake.launches() == n0 + 5);
  (void)g.sum(1);
  (void)g.softmax(1);
  (void)zeros({3}, TensorOptions().device(kCUDA));

  // A traced function compiles with the CUDA backend and launches its kernels.
  auto f = jit([](Tensor a) { return (a.exp() * 2 + 1).sum(1); });
  int n1 = fake.launches();
  Tensor r = f(g);
  CHECK(r.is_cuda());
  CHECK(r.sizes() == Shape{5});
  CHECK(fake.launches() > n1);
  CHECK(f.stats().misses == 1);
  (void)f(g);
  CHECK(f.stats().hits == 1);

  // Dumps hold the CUDA C and PTX of each kernel.
  fs::path dir = fs::temp_directory_path() / ("kiln_fake_dump_" + std::to_string(::getpid()));
  f.dump(dir.string(), g);
  int cu = 0, ptx = 0;
  std::string summary;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    cu += e.path().extension() == ".cu";
    ptx += e.path().extension() == ".ptx";
    if (e.path().filename() == "summary.txt") summary = e.path().string();
  }
  CHECK(cu >= 1);
  CHECK(ptx == cu);
  CHECK(!summary.empty());
  fs::remove_all(dir);

  // A profile of a CUDA plan: one event per step (each timed with the stream
  // synchronised), as many kernel steps as launches.
  const fs::path trace =
      fs::temp_directory_path() / ("kiln_fake_profile_" + std::to_string(::getpid()) + ".json");
  const int n2 = fake.launches();
  (void)f.profile(trace.string(), g);
  const int launched = fake.launches() - n2;
  std::ifstream in(trace);
  const nlohmann::json doc = nlohmann::json::parse(in);
  int kernel_steps = 0, calls = 0;
  std::set<int64_t> steps;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.value("cat", "") == "call") ++calls;
    if (e.value("cat", "") != "step") continue;
    steps.insert(e.at("args").at("step").get<int64_t>());
    kernel_steps += e.at("args").at("what") == "kernel";
  }
  CHECK(launched >= 1);
  CHECK(kernel_steps == launched);
  CHECK(calls == 1);
  CHECK(!steps.empty());
  CHECK(*steps.rbegin() == static_cast<int64_t>(steps.size()) - 1);  // steps 0..n-1, each once
  fs::remove(trace);

  // Timing events answer.
  cuda::Event a(0), b(0);
  a.record();
  b.record();
  CHECK(b.ms_since(a) == 1.0f);
}

namespace {

// A communicator with a device, as NCCL's is, for rank 0 of 2 whose peer holds
// the same data: it records what it was given. (The fake's device memory is
// host memory, so it reads and writes the buffers directly.)
struct DeviceCalls {
  int host = 0, device = 0;
  const void* send = nullptr;
};
class FakeDeviceCommunicator final : public Communicator {
 public:
  explicit FakeDeviceCommunicator(DeviceCalls* calls) : calls_(calls) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "fake"; }
  int device() const override { return 0; }
  void run(const CollectiveCall& c, const void* send, void* recv, double) override {
    calls_->host++;
    fake_call(c, send, recv);
  }
  void barrier(double) override {}
  void run_device(const CollectiveCall& c, const void* send, void* recv, const cuda::Event& ready,
                  cuda::Event& done, double) override {
    calls_->device++;
    calls_->send = send;
    ready.wait_on(cuda::collective_stream(0));
    fake_call(c, send, recv);
    done.record_on(cuda::collective_stream(0));
  }

 private:
  static void fake_call(const CollectiveCall& c, const void* send, void* recv) {
    const auto* in = static_cast<const float*>(send);
    auto* out = static_cast<float*>(recv);
    KILN_CHECK(c.dtype == DType::f32, "the fake communicator takes f32");
    if (c.op == OpKind::all_gather) {
      for (int64_t i = 0; i < 2 * c.count; ++i) out[i] = in[i % c.count];
    } else {
      KILN_CHECK(c.op == OpKind::reduce_scatter, "the fake communicator takes no ", op_name(c.op));
      for (int64_t i = 0; i < c.count / 2; ++i) out[i] = 2 * in[i];
    }
  }

  DeviceCalls* calls_;
};

}  // namespace

TEST_CASE("a driver that lacks a function Kiln calls is named, with the function") {
  if (cuda::available()) {
    MESSAGE("skipped: a real driver is present");
    return;
  }
  ::setenv("KILN_FAKE_CUDA_OMIT", "cuEventElapsedTime", 1);
  cuda::reload_driver_for_testing(KILN_FAKE_CUDA_PATH);
  const bool available = cuda::available();
  const std::string why = cuda::unavailable_reason();
  const std::vector<cuda::EntryPoint> table = cuda::driver_entry_points();
  cuda::reload_driver_for_testing("");
  ::unsetenv("KILN_FAKE_CUDA_OMIT");
  CHECK_FALSE(available);
  CHECK(why == std::string("CUDA is not available: the driver in ") + KILN_FAKE_CUDA_PATH +
                   " (CUDA 13.0) has no cuEventElapsedTime (needed by Kiln)");
  // The entries before it resolved; it and the ones after it did not.
  bool before = true;
  for (const auto& e : table) {
    if (std::string(e.name) == "cuEventElapsedTime") before = false;
    CHECK_MESSAGE(e.resolved == before, e.name);
  }
  CHECK_FALSE(before);
}

TEST_CASE("with a fake driver, argsort and attention on CUDA tensors launch the library kernels") {
  if (const std::string why = skip_reason("the GPU tests cover this"); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  FakeDriver fake;
  REQUIRE_MESSAGE(cuda::available(), cuda::unavailable_reason());
  manual_seed(2);
  // A short line: one bitonic block per line, no copy through the host.
  const Tensor x = randn({4, 100}).cuda();
  int n0 = fake.launches();
  Tensor order = x.argsort(1, /*descending=*/true);
  CHECK(order.is_cuda());
  CHECK(order.sizes() == Shape{4, 100});
  CHECK(fake.launches() == n0 + 1);
  CHECK(fake.last_function() == "kiln_sort_block_f32");
  CHECK(fake.last().grid == 4);
  CHECK(fake.last().block == 64);
  // A long line of int64: keys, 16 passes of (histogram, scan, scatter), the positions.
  const Tensor y = randint(0, 1000, {5000}, TensorOptions().dtype(kInt64)).cuda();
  n0 = fake.launches();
  (void)y.argsort();
  CHECK(fake.launches() == n0 + 1 + 16 * 3 + 1);
  CHECK(fake.last_function() == "kiln_sort_write");
  // Attention forward: one launch.
  const Tensor q = randn({2, 20, 8}).cuda(), k = randn({2, 30, 8}).cuda(),
               v = randn({2, 30, 4}).cuda();
  n0 = fake.launches();
  Tensor o = nn::functional::scaled_dot_product_attention(q, k, v);
  CHECK(o.sizes() == Shape{2, 20, 4});
  CHECK(fake.launches() == n0 + 1);
  CHECK(fake.last_function() == "kiln_attention_fwd_f32");
  CHECK(fake.last().grid == 2 * 2);  // batch x query blocks of 16
  CHECK(fake.last().block == 128);
  // Its gradient for the operands a mask selects (q and v): the rows' statistics,
  // then one kernel per gradient, into one buffer (q's, then v's).
  const Tensor g = randn({2, 20, 4}).cuda();
  const Attrs grads{
      {AttrKey::scale, 0.5}, {AttrKey::causal, int64_t{0}}, {AttrKey::which, int64_t{5}}};
  const TensorType both{DType::f32, {2 * 20 * 8 + 2 * 30 * 4}, q.device()};
  n0 = fake.launches();
  Tensor dqv = device_run(OpKind::attention_grad, grads, {q, k, v, o, g}, both);
  CHECK(dqv.sizes() == both.shape);
  CHECK(fake.launches() == n0 + 3);
  CHECK(fake.last_function() == "kiln_attention_grad_f32");
  CHECK(fake.last().grid == 2 * 2);  // v's: batch x key blocks of 16
}

// On an H200 the traced Adam step crashed while tracing: its step count lived
// on the CPU and the bias corrections moved to the parameters' device with
// to(), which read a symbolic tensor as if it had data. The conformance loss
// weights (a literal moved with .to() inside the traced body) did the same.
TEST_CASE("with a fake driver, a traced Adam step on CUDA parameters builds one CUDA plan") {
  if (const std::string why = skip_reason("the GPU tests cover this"); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  FakeDriver fake;
  REQUIRE_MESSAGE(cuda::available(), cuda::unavailable_reason());
  const Device gpu(kCUDA);
  Tensor w = randn({4}).cuda().requires_grad_();
  optim::Adam opt({w}, optim::AdamOptions(0.1));
  CHECK(opt.state().front().device() == gpu);  // the step count, with the parameters
  auto step = jit(
      [&](Tensor x) {
        opt.zero_grad();
        Tensor shift = tensor({1.f, 2.f, 3.f, 4.f}).to(gpu);  // built again on the GPU
        Tensor loss = (w * x + shift).pow(2).sum();
        loss.backward();
        opt.step();
        return loss;
      },
      "adam_step");
  const int n0 = fake.launches();
  Tensor loss;
  CHECK_NOTHROW(loss = step(randn({4}).cuda()));
  CHECK(loss.is_cuda());
  CHECK(fake.launches() > n0);
}

TEST_CASE("with a fake driver, collectives on CUDA tensors go to the communicator's device") {
  if (const std::string why = skip_reason("tests/distributed/nccl_test.cpp covers NCCL");
      !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  if (collectives::started()) {
    MESSAGE("skipped: distributed is already initialised in this process");
    return;
  }
  FakeDriver fake;
  REQUIRE_MESSAGE(cuda::available(), cuda::unavailable_reason());
  DeviceCalls calls;
  collectives::start([&] { return std::make_unique<FakeDeviceCommunicator>(&calls); }, 5);
  CHECK(distributed::device() == 0);
  Tensor x = arange(4, TensorOptions(kFloat));
  Tensor g = x.cuda();
  // The input is read where it lies on the device; the result comes back there.
  Tensor all = distributed::all_gather(g);
  CHECK(all.is_cuda());
  CHECK(calls.device == 1);
  CHECK(calls.host == 0);
  CHECK(calls.send == g.data_ptr<float>());
  CHECK(all.cpu().to_vector<float>() == std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3});
  Tensor half = distributed::reduce_scatter(g);
  CHECK(calls.device == 2);
  CHECK(half.cpu().to_vector<float>() == std::vector<float>{0, 2});
  // CPU tensors go to the host side of the same communicator.
  CHECK(distributed::all_gather(x).to_vector<float>() ==
        std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(calls.host == 1);
  CHECK(calls.device == 2);
  collectives::stop();
}

#endif
