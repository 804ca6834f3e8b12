// The CUDA driver, loaded at run time. libcuda.so.1 is opened with dlopen and
// every function Kiln calls is resolved through cuGetProcAddress into one
// table of entry points (cuda_driver.cpp), so every Kiln binary starts on a
// machine with no GPU and no driver; only using kCUDA is then an error, and it
// says what was looked for and what was found. Each device has its primary
// context and one stream; work is queued on that stream asynchronously and
// the host waits only where it reads (copies to host, synchronize()).
// No CUDA header appears here: handles are opaque pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dl_table.h"

namespace kiln::cuda {

/// Whether a driver and at least one device are present. Never throws.
bool available();
/// Why CUDA is unavailable ("" when it is available).
std::string unavailable_reason();
/// Throws kiln::Error("<what>: CUDA is not available: ...") unless available(),
/// or when `device` is not an existing device index.
void require(const char* what, int device = 0);

/// Number of devices (0 when unavailable).
int device_count();

struct DeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sm_count = 0;
  int max_threads_per_block = 0;
  int64_t total_memory = 0;  // bytes
  int driver_version = 0;    // e.g. 13000
  int arch() const { return cc_major * 10 + cc_minor; }
  /// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB; driver CUDA 13.0)".
  std::string str() const;
};
/// The device's properties (throws when unavailable).
const DeviceInfo& device_info(int device);

// ---- memory (device pointers are plain void*) ----

/// cuMemAlloc; returns nullptr when the device is out of memory (other errors throw).
void* mem_alloc(size_t bytes, int device);
void mem_free(void* p, int device);
/// (free, total) bytes as the driver reports them.
std::pair<size_t, size_t> mem_info(int device);
/// Page-locked host memory (fast, truly asynchronous copies).
void* host_alloc_pinned(size_t bytes);
void host_free_pinned(void* p);

/// Host -> device, queued on the device's stream. `src` may be reused when this
/// returns (pageable memory is staged by the driver; pinned memory must stay
/// untouched until the stream passes the copy).
void copy_to_device(void* dst, const void* src, size_t bytes, int device);
/// Device -> host: waits for the device's stream, so `dst` holds the data on return.
void copy_to_host(void* dst, const void* src, size_t bytes, int device);
/// Device -> device on the device's stream (asynchronous).
void copy_device(void* dst, const void* src, size_t bytes, int device);
/// Sets `bytes` bytes to zero on the device's stream (asynchronous).
void memset_zero(void* dst, size_t bytes, int device);
/// Waits until everything queued on the device's stream has finished.
void synchronize(int device);
/// The device's stream (a CUstream), for libraries that queue work on it (cuBLAS).
void* stream(int device);
/// A second stream of the device, for collectives (NCCL), created on first use:
/// its work is ordered after the device's stream only through events
/// (Event::record, Event::wait_on), so kernels and communication overlap.
void* collective_stream(int device);

// ---- kernels ----

/// A kernel loaded from a PTX or cubin image (a CUfunction).
using Function = void*;
/// Loads `image` (PTX text or a cubin) once per device and returns its kernel
/// `name`. Modules stay loaded for the life of the process (they are cached by
/// the image's contents).
Function load_function(const std::string& image, const std::string& name, int device);
/// Queues a launch of f on the device's stream. `params` as for cuLaunchKernel.
void launch(Function f, unsigned grid, unsigned block, unsigned shared_bytes, void** params,
            int device);

// ---- events ----

/// A CUDA event on the device's stream (for timing and for knowing when work is done).
class Event {
 public:
  /// `timing` false makes a cheaper event that only says when work is done.
  explicit Event(int device, bool timing = true);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  /// Records the event at the current end of the device's stream.
  void record();
  /// Records the event at the current end of `stream` (a stream of the same device).
  void record_on(void* stream);
  /// Makes later work queued on `stream` wait until the stream that last
  /// recorded this event has passed it (cuStreamWaitEvent; the host does not wait).
  void wait_on(void* stream) const;
  /// True once the stream has passed the last record() (or when never recorded).
  bool done() const;
  void wait() const;
  /// Milliseconds between `start`'s record and this one's (waits for this one).
  float ms_since(const Event& start) const;

 private:
  void* ev_ = nullptr;
  int device_ = 0;
};

// ---- the table of entry points ----

/// One entry of a table (runtime/dl_table.h); the driver's are keyed by base
/// name ("cuMemAlloc"), as cuGetProcAddress takes it.
using EntryPoint = dl::EntryPoint;
/// Every driver function Kiln calls, in table order.
std::vector<EntryPoint> driver_entry_points();
/// The shared library the loader opens ("libcuda.so.1", or KILN_CUDA_DRIVER when set).
std::string driver_library();

/// Tests only: forgets the loaded driver and loads `library` instead on next use
/// ("" restores the default). Handles from the old load stay valid.
void reload_driver_for_testing(const std::string& library);

}  // namespace kiln::cuda
