// A fake CUDA driver for tests on machines without a GPU: device memory is
// host memory, copies are memcpy, launches only count themselves. It lets the
// host side of the CUDA path (loading through cuGetProcAddress, contexts,
// streams, the caching allocator, transfers, module loading, kernel-argument
// upload, plans) run for real. Kernels do not run: their outputs are garbage.
// Each kernel name gets its own function handle, so the tests see which ran.
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_launches = 0;
int g_last_grid = 0, g_last_block = 0;
// The last launch's first three parameters read as a generated kernel's
// (buffer table, begin, end), and the table's first entries.
void* g_last_table[4] = {};
long long g_last_begin = 0, g_last_end = 0;
// Kernel names by function handle (0x4000 + index), and the last one launched.
std::vector<std::string> g_functions;
std::string g_last_function;

// Kernels that take one argument struct (codegen/cuda_library.h), not a buffer table.
bool is_library_kernel(const std::string& name) {
  for (const char* p : {"kiln_sort_", "kiln_radix_", "kiln_attention_"})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

CUresult fake_init(unsigned) {
  return CUDA_SUCCESS;
}
CUresult fake_version(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult fake_count(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult fake_get(CUdevice* d, int i) {
  *d = i;
  return i == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
CUresult fake_name(char* name, int len, CUdevice) {
  std::strncpy(name, "Kiln fake GPU", static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult fake_attribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = 4;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = 1024;
      break;
    default:
      *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult fake_total(size_t* b, CUdevice) {
  *b = size_t(1) << 30;
  return CUDA_SUCCESS;
}
CUctx_st* const kCtx = reinterpret_cast<CUctx_st*>(0x1000);
CUresult fake_retain(CUcontext* c, CUdevice) {
  *c = kCtx;
  return CUDA_SUCCESS;
}
CUresult fake_set_current(CUcontext) {
  return CUDA_SUCCESS;
}
CUresult fake_get_current(CUcontext* c) {
  *c = kCtx;
  return CUDA_SUCCESS;
}
CUresult fake_alloc(CUdeviceptr* p, size_t b) {
  *p = reinterpret_cast<CUdeviceptr>(std::malloc(b ? b : 1));
  return CUDA_SUCCESS;
}
CUresult fake_free(CUdeviceptr p) {
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
CUresult fake_info(size_t* f, size_t* t) {
  *f = *t = size_t(1) << 30;
  return CUDA_SUCCESS;
}
CUresult fake_host_alloc(void** p, size_t b, unsigned) {
  *p = std::malloc(b ? b : 1);
  return CUDA_SUCCESS;
}
CUresult fake_host_free(void* p) {
  std::free(p);
  return CUDA_SUCCESS;
}
CUresult fake_htod(CUdeviceptr d, const void* s, size_t b, CUstream) {
  std::memcpy(reinterpret_cast<void*>(d), s, b);
  return CUDA_SUCCESS;
}
CUresult fake_dtoh(void* d, CUdeviceptr s, size_t b, CUstream) {
  std::memcpy(d, reinterpret_cast<void*>(s), b);
  return CUDA_SUCCESS;
}
CUresult fake_dtod(CUdeviceptr d, CUdeviceptr s, size_t b, CUstream) {
  std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<void*>(s), b);
  return CUDA_SUCCESS;
}
CUresult fake_memset(CUdeviceptr d, unsigned char v, size_t b, CUstream) {
  std::memset(reinterpret_cast<void*>(d), v, b);
  return CUDA_SUCCESS;
}
CUresult fake_stream_create(CUstream* s, unsigned) {
  *s = reinterpret_cast<CUstream>(0x2000);
  return CUDA_SUCCESS;
}
CUresult fake_stream_sync(CUstream) {
  return CUDA_SUCCESS;
}
CUresult fake_stream_wait_event(CUstream, CUevent, unsigned) {
  return CUDA_SUCCESS;  // the fake runs everything at once, in order
}
CUresult fake_event_create(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(std::malloc(1));
  return CUDA_SUCCESS;
}
CUresult fake_event_destroy(CUevent e) {
  std::free(e);
  return CUDA_SUCCESS;
}
CUresult fake_event_record(CUevent, CUstream) {
  return CUDA_SUCCESS;
}
CUresult fake_event_query(CUevent) {
  return CUDA_SUCCESS;
}
CUresult fake_event_sync(CUevent) {
  return CUDA_SUCCESS;
}
CUresult fake_elapsed(float* ms, CUevent, CUevent) {
  *ms = 1;
  return CUDA_SUCCESS;
}
CUresult fake_module_load(CUmodule* m, const void* image, unsigned, CUjit_option*, void**) {
  const char* s = static_cast<const char*>(image);
  bool elf = std::memcmp(s,
                         "\x7f"
                         "ELF",
                         4) == 0;
  if (!elf && std::strstr(s, ".entry") == nullptr) return CUDA_ERROR_INVALID_IMAGE;
  *m = reinterpret_cast<CUmodule>(0x3000);
  return CUDA_SUCCESS;
}
CUresult fake_get_function(CUfunction* f, CUmodule, const char* name) {
  size_t i = 0;
  while (i < g_functions.size() && g_functions[i] != name) ++i;
  if (i == g_functions.size()) g_functions.push_back(name);
  *f = reinterpret_cast<CUfunction>(0x4000 + i);
  return CUDA_SUCCESS;
}
CUresult fake_func_attr(CUfunction, CUfunction_attribute, int) {
  return CUDA_SUCCESS;
}
CUresult fake_launch(CUfunction f, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned,
                     unsigned, CUstream, void** params, void**) {
  const size_t fi = reinterpret_cast<uintptr_t>(f) - 0x4000;
  if (!params || gx == 0 || bx == 0 || bx > 1024 || fi >= g_functions.size())
    return CUDA_ERROR_INVALID_VALUE;
  ++g_launches;
  g_last_grid = static_cast<int>(gx);
  g_last_block = static_cast<int>(bx);
  g_last_function = g_functions[fi];
  if (is_library_kernel(g_last_function)) return CUDA_SUCCESS;
  void* const* table = *static_cast<void* const* const*>(params[0]);
  for (int i = 0; i < 4; ++i) g_last_table[i] = table[i];
  g_last_begin = *static_cast<long long*>(params[1]);
  g_last_end = *static_cast<long long*>(params[2]);
  return CUDA_SUCCESS;
}
CUresult fake_error_name(CUresult, const char** s) {
  *s = "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult fake_error_string(CUresult, const char** s) {
  *s = "an error from the fake driver";
  return CUDA_SUCCESS;
}

struct Entry {
  const char* name;
  void* fn;
};
#define KILN_FAKE(n, f) \
  { n, reinterpret_cast<void*>(&f) }
const Entry kEntries[] = {
    KILN_FAKE("cuInit", fake_init),
    KILN_FAKE("cuDriverGetVersion", fake_version),
    KILN_FAKE("cuDeviceGetCount", fake_count),
    KILN_FAKE("cuDeviceGet", fake_get),
    KILN_FAKE("cuDeviceGetName", fake_name),
    KILN_FAKE("cuDeviceGetAttribute", fake_attribute),
    KILN_FAKE("cuDeviceTotalMem", fake_total),
    KILN_FAKE("cuDevicePrimaryCtxRetain", fake_retain),
    KILN_FAKE("cuCtxSetCurrent", fake_set_current),
    KILN_FAKE("cuCtxGetCurrent", fake_get_current),
    KILN_FAKE("cuMemAlloc", fake_alloc),
    KILN_FAKE("cuMemFree", fake_free),
    KILN_FAKE("cuMemGetInfo", fake_info),
    KILN_FAKE("cuMemHostAlloc", fake_host_alloc),
    KILN_FAKE("cuMemFreeHost", fake_host_free),
    KILN_FAKE("cuMemcpyHtoDAsync", fake_htod),
    KILN_FAKE("cuMemcpyDtoHAsync", fake_dtoh),
    KILN_FAKE("cuMemcpyDtoDAsync", fake_dtod),
    KILN_FAKE("cuMemsetD8Async", fake_memset),
    KILN_FAKE("cuStreamCreate", fake_stream_create),
    KILN_FAKE("cuStreamSynchronize", fake_stream_sync),
    KILN_FAKE("cuStreamWaitEvent", fake_stream_wait_event),
    KILN_FAKE("cuEventCreate", fake_event_create),
    KILN_FAKE("cuEventDestroy", fake_event_destroy),
    KILN_FAKE("cuEventRecord", fake_event_record),
    KILN_FAKE("cuEventQuery", fake_event_query),
    KILN_FAKE("cuEventSynchronize", fake_event_sync),
    KILN_FAKE("cuEventElapsedTime", fake_elapsed),
    KILN_FAKE("cuModuleLoadDataEx", fake_module_load),
    KILN_FAKE("cuModuleGetFunction", fake_get_function),
    KILN_FAKE("cuFuncSetAttribute", fake_func_attr),
    KILN_FAKE("cuLaunchKernel", fake_launch),
    KILN_FAKE("cuGetErrorName", fake_error_name),
    KILN_FAKE("cuGetErrorString", fake_error_string),
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* found) {
  // KILN_FAKE_CUDA_OMIT=<name>: a driver that lacks that function.
  const char* omit = std::getenv("KILN_FAKE_CUDA_OMIT");
  for (const Entry& e : kEntries)
    if (std::string(symbol) == e.name && !(omit && std::string(omit) == e.name)) {
      *pfn = e.fn;
      if (found) *found = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  *pfn = nullptr;
  if (found) *found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* v) {
  return fake_version(v);
}

/// How many kernels were launched, and the last launch's grid and block (read by the tests).
__attribute__((visibility("default"))) int kiln_fake_launches() {
  return g_launches;
}
__attribute__((visibility("default"))) int kiln_fake_last_grid() {
  return g_last_grid;
}
__attribute__((visibility("default"))) int kiln_fake_last_block() {
  return g_last_block;
}
/// The name of the last kernel launched.
__attribute__((visibility("default"))) const char* kiln_fake_last_function() {
  return g_last_function.c_str();
}
/// The last launch as a generated kernel sees it: its buffer table's first 4 entries, begin, end.
__attribute__((visibility("default"))) void kiln_fake_last_kernel(void** table, long long* begin,
                                                                  long long* end) {
  for (int i = 0; i < 4; ++i) table[i] = g_last_table[i];
  *begin = g_last_begin;
  *end = g_last_end;
}
}
