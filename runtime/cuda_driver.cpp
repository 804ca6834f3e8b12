// The CUDA driver loader (see cuda_driver.h). One X-macro lists every driver
// function Kiln calls; the loader dlopens libcuda.so.1, looks up
// cuGetProcAddress_v2 in it and resolves the whole list through that into one
// table (runtime/dl_table.h). cuda.h is included for declarations and types
// only: nothing links libcuda.
#if KILN_HAVE_CUDA_TOOLKIT  // (else: cuda_unavailable.cpp)
#include "runtime/cuda_driver.h"

#include <cuda.h>
#include <dlfcn.h>  // dlclose

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "ir/error.h"
#include "runtime/dl_table.h"

namespace kiln::cuda {
namespace {

// Every driver function Kiln calls. Names are cuda.h's (the header maps some
// to versioned symbols, e.g. cuMemAlloc -> cuMemAlloc_v2; the table's field
// then has that name and type, and cuGetProcAddress is asked for the base name).
// clang-format off
#define KILN_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuInit) \
  X(cuDriverGetVersion) \
  X(cuDeviceGetCount) \
  X(cuDeviceGet) \
  X(cuDeviceGetName) \
  X(cuDeviceGetAttribute) \
  X(cuDeviceTotalMem) \
  X(cuDevicePrimaryCtxRetain) \
  X(cuCtxSetCurrent) \
  X(cuCtxGetCurrent) \
  X(cuMemAlloc) \
  X(cuMemFree) \
  X(cuMemGetInfo) \
  X(cuMemHostAlloc) \
  X(cuMemFreeHost) \
  X(cuMemcpyHtoDAsync) \
  X(cuMemcpyDtoHAsync) \
  X(cuMemcpyDtoDAsync) \
  X(cuMemsetD8Async) \
  X(cuStreamCreate) \
  X(cuStreamSynchronize) \
  X(cuStreamWaitEvent) \
  X(cuEventCreate) \
  X(cuEventDestroy) \
  X(cuEventRecord) \
  X(cuEventQuery) \
  X(cuEventSynchronize) \
  X(cuEventElapsedTime) \
  X(cuModuleLoadDataEx) \
  X(cuModuleGetFunction) \
  X(cuFuncSetAttribute) \
  X(cuLaunchKernel) \
  X(cuGetErrorName) \
  X(cuGetErrorString)
// clang-format on

KILN_DL_TABLE(Api, KILN_CUDA_DRIVER_FUNCTIONS, KILN_DL_AS_WRITTEN);

// What is looked up with dlsym: the resolver of the rest, and the version query
// (asked first, to tell a stub library or an old driver from a missing function).
#define KILN_CUDA_LOADER_FUNCTIONS(X) \
  X(cuGetProcAddress)                 \
  X(cuDriverGetVersion)
KILN_DL_TABLE(Loader, KILN_CUDA_LOADER_FUNCTIONS, KILN_DL_AS_EXPORTED);

struct PerDevice {
  std::once_flag once;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  std::once_flag collective_once;
  CUstream collective_stream = nullptr;  // created on first use (collective_stream())
  DeviceInfo info;
  std::mutex modules_mu;
  std::unordered_map<std::string, CUmodule> modules;  // keyed by image contents
};

struct Driver {
  std::string library;
  std::string error;  // non-empty: unavailable, and why
  void* handle = nullptr;
  Api api;
  int version = 0;
  int count = 0;
  std::vector<std::unique_ptr<PerDevice>> devices;
};

std::string error_name(const Api& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

std::string version_str(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::unique_ptr<Driver> load(const std::string& library) {
  auto d = std::make_unique<Driver>();
  d->library = library;
  const std::string prefix = "CUDA is not available: ";
  dl::Library lib = dl::open(library);
  d->handle = lib.handle;
  if (!d->handle) {
    d->error = prefix + lib.error + "; kCUDA tensors need an NVIDIA driver";
    return d;
  }
  Loader loader;
  if (std::string missing = dl::resolve(loader, library, d->handle); !missing.empty()) {
    d->error =
        prefix + missing + "; expected a driver for CUDA 12.0 or newer, update the NVIDIA driver";
    return d;
  }
  CUresult vr = loader.cuDriverGetVersion(&d->version);
  if (vr == CUDA_ERROR_STUB_LIBRARY) {
    d->error = prefix + library +
               " is the CUDA toolkit's stub library, not a driver "
               "(cuDriverGetVersion returned CUDA_ERROR_STUB_LIBRARY); kCUDA tensors need an "
               "NVIDIA driver";
    return d;
  }
  if (vr != CUDA_SUCCESS) {
    d->error = prefix + "cuDriverGetVersion in " + library + " failed (CUresult " +
               std::to_string(static_cast<int>(vr)) + ")";
    return d;
  }
  if (d->version < 12000) {
    d->error = prefix + "the NVIDIA driver supports CUDA " + version_str(d->version) +
               " (expected 12.0 or newer; update the driver)";
    return d;
  }
  // Ask for the symbol versions that match the header Kiln was built with, or
  // the driver's own when it is older.
  const int want = std::min(d->version, CUDA_VERSION);
  std::string missing = dl::resolve(
      d->api, "the driver in " + library + " (CUDA " + version_str(d->version) + ")",
      [&](const char* name) {
        void* fn = nullptr;
        CUdriverProcAddressQueryResult found{};
        CUresult r = loader.cuGetProcAddress(name, &fn, want, CU_GET_PROC_ADDRESS_DEFAULT, &found);
        return r == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS ? fn : nullptr;
      });
  if (!missing.empty()) {
    d->error = prefix + missing;
    return d;
  }
  const Api& api = d->api;
  CUresult r = api.cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE) {
    d->error = prefix + "no CUDA device found (cuInit: " + error_name(api, r) + ")";
    return d;
  }
  if (r != CUDA_SUCCESS) {
    d->error = prefix + "cuInit failed: " + error_name(api, r);
    return d;
  }
  if ((r = api.cuDeviceGetCount(&d->count)) != CUDA_SUCCESS) {
    d->error = prefix + "cuDeviceGetCount failed: " + error_name(api, r);
    return d;
  }
  if (d->count == 0) {
    d->error = prefix + "no CUDA device found (cuDeviceGetCount returned 0)";
    return d;
  }
  for (int i = 0; i < d->count; ++i) d->devices.push_back(std::make_unique<PerDevice>());
  return d;
}

std::string default_library() {
  const char* env = std::getenv("KILN_CUDA_DRIVER");
  return env && *env ? env : "libcuda.so.1";
}

// The loaded driver. Replaced (never freed) by reload_driver_for_testing, so
// pointers into an old one stay valid.
std::mutex g_load_mu;
std::atomic<Driver*> g_driver{nullptr};
std::string g_library_override;

Driver& driver() {
  Driver* d = g_driver.load(std::memory_order_acquire);
  if (d) return *d;
  std::lock_guard<std::mutex> lock(g_load_mu);
  d = g_driver.load(std::memory_order_relaxed);
  if (!d) {
    d = load(g_library_override.empty() ? default_library() : g_library_override).release();
    g_driver.store(d, std::memory_order_release);
  }
  return *d;
}

[[noreturn]] void fail(const Api& api, CUresult r, const char* call) {
  throw Error(std::string("CUDA error: ") + call + " returned " + error_name(api, r));
}

#define KILN_CU(call)                                       \
  do {                                                      \
    CUresult kiln_r_ = (call);                              \
    if (kiln_r_ != CUDA_SUCCESS) fail(api, kiln_r_, #call); \
  } while (0)

// A usable driver (throws with the reason otherwise).
Driver& ready() {
  Driver& d = driver();
  if (!d.error.empty()) throw Error(d.error);
  return d;
}

// The device's state, created on first use, with its context current on this thread.
PerDevice& device(int index) {
  Driver& d = ready();
  if (index < 0 || index >= d.count)
    throw Error("cuda:" + std::to_string(index) + " does not exist (" + std::to_string(d.count) +
                " CUDA device" + (d.count == 1 ? "" : "s") + " found)");
  PerDevice& p = *d.devices[static_cast<size_t>(index)];
  const Api& api = d.api;
  std::call_once(p.once, [&] {
    KILN_CU(api.cuDeviceGet(&p.dev, index));
    KILN_CU(api.cuDevicePrimaryCtxRetain(&p.ctx, p.dev));
    KILN_CU(api.cuCtxSetCurrent(p.ctx));
    KILN_CU(api.cuStreamCreate(&p.stream, CU_STREAM_NON_BLOCKING));
    char name[256] = {};
    KILN_CU(api.cuDeviceGetName(name, sizeof(name), p.dev));
    DeviceInfo& i = p.info;
    i.name = name;
    KILN_CU(
        api.cuDeviceGetAttribute(&i.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, p.dev));
    KILN_CU(
        api.cuDeviceGetAttribute(&i.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, p.dev));
    KILN_CU(api.cuDeviceGetAttribute(&i.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, p.dev));
    KILN_CU(api.cuDeviceGetAttribute(&i.max_threads_per_block,
                                     CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, p.dev));
    size_t total = 0;
    KILN_CU(api.cuDeviceTotalMem(&total, p.dev));
    i.total_memory = static_cast<int64_t>(total);
    i.driver_version = d.version;
  });
  thread_local CUcontext current = nullptr;
  if (current != p.ctx) {
    KILN_CU(api.cuCtxSetCurrent(p.ctx));
    current = p.ctx;
  }
  return p;
}

const Api& api_of() {
  return driver().api;
}

}  // namespace

bool available() {
  return driver().error.empty();
}
std::string unavailable_reason() {
  return driver().error;
}

void require(const char* what, int index) {
  try {
    device(index);
  } catch (Error& e) {
    throw Error(std::string(what) + ": " + e.what());
  }
}

int device_count() {
  Driver& d = driver();
  return d.error.empty() ? d.count : 0;
}

std::string DeviceInfo::str() const {
  std::ostringstream os;
  os.precision(3);
  os << name << " (sm_" << arch() << ", " << sm_count << " SMs, "
     << static_cast<double>(total_memory) / (1024.0 * 1024 * 1024) << " GiB; driver CUDA "
     << version_str(driver_version) << ")";
  return os.str();
}

const DeviceInfo& device_info(int index) {
  return device(index).info;
}

void* mem_alloc(size_t bytes, int index) {
  device(index);
  const Api& api = api_of();
  CUdeviceptr p = 0;
  CUresult r = api.cuMemAlloc(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  if (r != CUDA_SUCCESS) fail(api, r, "cuMemAlloc");
  return reinterpret_cast<void*>(p);
}

void mem_free(void* p, int index) {
  device(index);
  const Api& api = api_of();
  KILN_CU(api.cuMemFree(reinterpret_cast<CUdeviceptr>(p)));
}

std::pair<size_t, size_t> mem_info(int index) {
  device(index);
  const Api& api = api_of();
  size_t free = 0, total = 0;
  KILN_CU(api.cuMemGetInfo(&free, &total));
  return {free, total};
}

void* host_alloc_pinned(size_t bytes) {
  device(0);
  const Api& api = api_of();
  void* p = nullptr;
  KILN_CU(api.cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE));
  return p;
}

void host_free_pinned(void* p) {
  const Api& api = api_of();
  KILN_CU(api.cuMemFreeHost(p));
}

void copy_to_device(void* dst, const void* src, size_t bytes, int index) {
  if (bytes == 0) return;
  PerDevice& p = device(index);
  const Api& api = api_of();
  KILN_CU(api.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, bytes, p.stream));
}

void copy_to_host(void* dst, const void* src, size_t bytes, int index) {
  PerDevice& p = device(index);
  const Api& api = api_of();
  if (bytes)
    KILN_CU(api.cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), bytes, p.stream));
  KILN_CU(api.cuStreamSynchronize(p.stream));
}

void copy_device(void* dst, const void* src, size_t bytes, int index) {
  if (bytes == 0 || dst == src) return;
  PerDevice& p = device(index);
  const Api& api = api_of();
  KILN_CU(api.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst),
                                reinterpret_cast<CUdeviceptr>(src), bytes, p.stream));
}

void memset_zero(void* dst, size_t bytes, int index) {
  if (bytes == 0) return;
  PerDevice& p = device(index);
  const Api& api = api_of();
  KILN_CU(api.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst), 0, bytes, p.stream));
}

void synchronize(int index) {
  PerDevice& p = device(index);
  const Api& api = api_of();
  KILN_CU(api.cuStreamSynchronize(p.stream));
}

void* stream(int index) {
  return device(index).stream;
}

void* collective_stream(int index) {
  PerDevice& p = device(index);
  const Api& api = api_of();
  std::call_once(p.collective_once, [&] {
    KILN_CU(api.cuStreamCreate(&p.collective_stream, CU_STREAM_NON_BLOCKING));
  });
  return p.collective_stream;
}

Function load_function(const std::string& image, const std::string& name, int index) {
  PerDevice& p = device(index);
  const Api& api = api_of();
  std::lock_guard<std::mutex> lock(p.modules_mu);
  auto it = p.modules.find(image);
  if (it == p.modules.end()) {
    char log[8192] = {};
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* vals[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log)))};
    CUmodule m = nullptr;
    CUresult r = api.cuModuleLoadDataEx(&m, image.c_str(), 2, opts, vals);
    if (r != CUDA_SUCCESS)
      throw Error("CUDA error: loading the module of kernel '" + name + "' for " + p.info.name +
                  " (sm_" + std::to_string(p.info.arch()) + ") failed with " + error_name(api, r) +
                  (log[0] ? std::string(":\n") + log : std::string()));
    it = p.modules.emplace(image, m).first;
  }
  CUfunction f = nullptr;
  CUresult r = api.cuModuleGetFunction(&f, it->second, name.c_str());
  if (r != CUDA_SUCCESS)
    throw Error("CUDA error: the module has no kernel '" + name + "' (" + error_name(api, r) + ")");
  return f;
}

void launch(Function f, unsigned grid, unsigned block, unsigned shared_bytes, void** params,
            int index) {
  PerDevice& p = device(index);
  const Api& api = api_of();
  auto fn = static_cast<CUfunction>(f);
  if (shared_bytes > 48 * 1024)
    KILN_CU(api.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   static_cast<int>(shared_bytes)));
  KILN_CU(api.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, shared_bytes, p.stream, params, nullptr));
}

Event::Event(int index, bool timing) : device_(index) {
  device(index);
  const Api& api = api_of();
  CUevent e = nullptr;
  KILN_CU(api.cuEventCreate(&e, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
  ev_ = e;
}

Event::~Event() {
  if (ev_) api_of().cuEventDestroy(static_cast<CUevent>(ev_));
}

void Event::record() {
  record_on(device(device_).stream);
}

void Event::record_on(void* stream) {
  device(device_);
  const Api& api = api_of();
  KILN_CU(api.cuEventRecord(static_cast<CUevent>(ev_), static_cast<CUstream>(stream)));
}

void Event::wait_on(void* stream) const {
  device(device_);
  const Api& api = api_of();
  KILN_CU(api.cuStreamWaitEvent(static_cast<CUstream>(stream), static_cast<CUevent>(ev_), 0));
}

bool Event::done() const {
  const Api& api = api_of();
  CUresult r = api.cuEventQuery(static_cast<CUevent>(ev_));
  if (r == CUDA_ERROR_NOT_READY) return false;
  if (r != CUDA_SUCCESS) fail(api, r, "cuEventQuery");
  return true;
}

void Event::wait() const {
  const Api& api = api_of();
  KILN_CU(api.cuEventSynchronize(static_cast<CUevent>(ev_)));
}

float Event::ms_since(const Event& start) const {
  wait();
  const Api& api = api_of();
  float ms = 0;
  KILN_CU(api.cuEventElapsedTime(&ms, static_cast<CUevent>(start.ev_), static_cast<CUevent>(ev_)));
  return ms;
}

std::vector<EntryPoint> driver_entry_points() {
  return dl::entry_points(driver().api);
}

std::string driver_library() {
  return driver().library;
}

void reload_driver_for_testing(const std::string& library) {
  std::lock_guard<std::mutex> lock(g_load_mu);
  g_library_override = library;
  // The old state is kept so pointers into it stay valid (and reachable from here,
  // so leak checkers see it is kept on purpose); a library that gave no usable
  // driver is closed, so its soname does not shadow the next load.
  static auto* retired = new std::vector<Driver*>();
  Driver* old = g_driver.exchange(nullptr, std::memory_order_acq_rel);
  if (old) retired->push_back(old);
  if (old && !old->error.empty() && old->handle) {
    ::dlclose(old->handle);
    old->handle = nullptr;
  }
}

}  // namespace kiln::cuda
#endif
