// The CUDA driver and cuBLAS loaders: the error a user gets when there is no
// driver, and the tables of entry points. None of this needs a GPU.
#include <dlfcn.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "cuda_device_util.h"
#include "runtime/allocator.h"
#include "runtime/storage.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Loads `library` instead of the real driver for the life of the object.
struct DriverOverride {
  explicit DriverOverride(const std::string& library) { cuda::reload_driver_for_testing(library); }
  ~DriverOverride() { cuda::reload_driver_for_testing(""); }
};

std::string read_source(const std::string& rel) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Names called through the table in a source file: "api.cuMemAlloc(" -> cuMemAlloc.
std::set<std::string> called(const std::string& source, const std::string& prefix) {
  std::set<std::string> out;
  std::regex re("api\\.(" + prefix + "[A-Za-z0-9_]*)\\(");
  for (auto it = std::sregex_iterator(source.begin(), source.end(), re);
       it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

const char* kStub = "/usr/local/cuda/lib64/stubs/libcuda.so";

}  // namespace

TEST_CASE("kCUDA without a driver is a clear error, and the CPU path is untouched") {
  KILN_REQUIRE_CUDA_BUILD();
  DriverOverride missing("/nonexistent/libcuda.so.1");
  CHECK_FALSE(cuda::available());
  CHECK(cuda::device_count() == 0);
  std::string why = cuda::unavailable_reason();
  CHECK(why.find(
            "CUDA is not available: /nonexistent/libcuda.so.1 could not be loaded (dlopen: ") == 0);
  CHECK(why.find("kCUDA tensors need an NVIDIA driver") != std::string::npos);

  Tensor x = randn({2, 3});
  KILN_CHECK_ERROR(x.to(kCUDA), "to(cuda:0)", "CUDA is not available", "could not be loaded",
                   "need an NVIDIA driver");
  KILN_CHECK_ERROR(x.cuda(), "CUDA is not available");
  // Named by the user's line, never by the internal op `constant`.
  KILN_CHECK_ERROR(zeros({4}, TensorOptions().device(kCUDA)), "CUDA is not available",
                   "driver_test.cpp:");
  CHECK(test::error_of([] { (void)zeros({4}, TensorOptions().device(kCUDA)); })
            .find("constant") == std::string::npos);
  KILN_CHECK_ERROR(randn({4}, TensorOptions().device(kCUDA)), "CUDA is not available");
  KILN_CHECK_ERROR(Storage::allocate(16, Device(kCUDA)), "CUDA is not available");
  KILN_CHECK_ERROR(cuda::device_info(0), "CUDA is not available");
  KILN_CHECK_ERROR(cuda::require("my op"), "my op: CUDA is not available");
  CHECK_FALSE(cublas_available());
  CHECK(cublas_unavailable_reason().find("is not available") != std::string::npos);

  // The CPU path does not care.
  Tensor y = (x * 2 + 1).relu().sum();
  CHECK(std::isfinite(y.item<float>()));
  auto f = jit([](Tensor a) { return (a.exp() * 2).sum(1); });
  CHECK(allclose(f(x), (x.exp() * 2).sum(1)));
}

TEST_CASE("the toolkit's stub library is recognised as no driver") {
  KILN_REQUIRE_CUDA_BUILD();
  if (!std::filesystem::exists(kStub)) {
    MESSAGE("skipped: no stub library at " << kStub);
    return;
  }
  if (cuda::available()) {
    MESSAGE("skipped: a real driver is loaded (the stub test is for machines without one)");
    return;
  }
  DriverOverride stub(kStub);
  CHECK_FALSE(cuda::available());
  CHECK(cuda::unavailable_reason().find("is the CUDA toolkit's stub library, not a driver") !=
        std::string::npos);
  KILN_CHECK_ERROR(ones({2}).to(kCUDA), "stub library");
}

TEST_CASE("a library with no cuGetProcAddress_v2 is named as too old a driver") {
  KILN_REQUIRE_CUDA_BUILD();
  if (cuda::available()) {
    MESSAGE("skipped: a real driver is loaded");
    return;
  }
  DriverOverride libm("libm.so.6");
  CHECK_FALSE(cuda::available());
  CHECK(cuda::unavailable_reason() ==
        "CUDA is not available: libm.so.6 has no cuGetProcAddress_v2 (needed by Kiln); expected a "
        "driver for CUDA 12.0 or newer, update the NVIDIA driver");
  for (const auto& e : cuda::driver_entry_points()) CHECK_FALSE(e.resolved);
}

TEST_CASE("the driver's entry-point table lists every function Kiln calls") {
  KILN_REQUIRE_CUDA_BUILD();
  std::vector<cuda::EntryPoint> table = cuda::driver_entry_points();
  std::set<std::string> names;
  for (const auto& e : table) CHECK_MESSAGE(names.insert(e.name).second, "listed twice: ", e.name);
  // Every cu* function the runtime calls goes through the table.
  std::set<std::string> used = called(read_source("runtime/cuda_driver.cpp"), "cu");
  CHECK(used.size() >= 20);
  for (const std::string& n : used)
    CHECK_MESSAGE(names.count(n), "called but not in the table: ", n);
  for (const char* must :
       {"cuInit", "cuMemAlloc", "cuMemFree", "cuModuleLoadDataEx", "cuModuleGetFunction",
        "cuLaunchKernel", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuStreamSynchronize",
        "cuDeviceGetAttribute", "cuEventElapsedTime"})
    CHECK_MESSAGE(names.count(must), "missing: ", must);
  // Each name is one the driver exports (the toolkit's stub has the driver's symbols).
  if (void* h = ::dlopen(kStub, RTLD_NOW | RTLD_LOCAL)) {
    for (const auto& e : table)
      CHECK_MESSAGE(::dlsym(h, e.name) != nullptr, "not in the driver: ", e.name);
    ::dlclose(h);
  }
  // With a real driver every entry resolves.
  if (cuda::available())
    for (const auto& e : cuda::driver_entry_points())
      CHECK_MESSAGE(e.resolved, "unresolved: ", e.name);
}

TEST_CASE(
    "the cuBLAS table lists every function Kiln calls, and resolves when the libraries load") {
  KILN_REQUIRE_CUDA_BUILD();
  std::vector<cuda::EntryPoint> table = cublas_entry_points();
  std::set<std::string> names;
  for (const auto& e : table) CHECK(names.insert(e.name).second);
  // Source names may be mapped to versioned symbols (cublasCreate -> cublasCreate_v2).
  for (const std::string& n : called(read_source("runtime/cublas.cpp"), "cublas"))
    CHECK_MESSAGE((names.count(n) || names.count(n + "_v2")), "called but not in the table: ", n);
  for (const char* must :
       {"cublasSgemmStridedBatched", "cublasDgemmStridedBatched", "cublasLtMatmul",
        "cublasLtMatmulAlgoGetHeuristic", "cublasCreate_v2", "cublasSetStream_v2"})
    CHECK_MESSAGE(names.count(must), "missing: ", must);
  bool loaded = true;
  for (const auto& e : table) loaded = loaded && e.resolved;
  // The libraries load without a driver; only using them needs one.
  std::string why = cublas_unavailable_reason();
  if (why.rfind("cuBLAS is not available", 0) != 0)
    CHECK_MESSAGE(loaded, "the libraries loaded but some entry points did not resolve");
  else
    MESSAGE("cuBLAS libraries not loadable here: " << why);
}

TEST_CASE("binaries do not link the CUDA driver or cuBLAS") {
  // The runtime dlopens them; a link would stop every binary from starting without a GPU.
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool driver_mapped = false;
  while (std::getline(maps, line))  // (the stub test above maps the toolkit's stub on purpose)
    driver_mapped = driver_mapped || (line.find("libcuda.so") != std::string::npos &&
                                      line.find("/stubs/") == std::string::npos);
  if (!cuda::available()) CHECK_FALSE(driver_mapped);
}
