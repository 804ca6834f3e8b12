// Storage (an owned, aligned block of device memory from a caching allocator)
// and View (a non-owning strided window onto one, as kernels see it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "ir/device.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace kiln {

/// A block of memory on one device. Freed back to its allocator's cache.
class Storage {
 public:
  /// Allocates `bytes` on `device` (CPU: 64-byte aligned; large blocks ask for huge pages).
  static std::shared_ptr<Storage> allocate(size_t bytes, Device device = {});
  /// Wraps memory Kiln does not own (from_blob); `deleter` may be empty.
  static std::shared_ptr<Storage> wrap(void* data, size_t bytes, Device device,
                                       std::function<void(void*)> deleter = {});
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  std::function<void(void*)> deleter_;  // empty: return to the caching allocator
};

/// What a kernel sees: a typed, strided window. `data` points at element 0
/// (offsets are already applied); strides are in elements and may be 0 (broadcast).
struct View {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  Strides strides;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return kiln::numel(shape); }
  bool contiguous() const { return is_contiguous(shape, strides); }
  template <class T>
  T* ptr() const { return static_cast<T*>(data); }
};

/// A dense view of a buffer.
inline View dense_view(void* data, DType dt, const Shape& s) {
  return View{data, dt, s, contiguous_strides(s)};
}

}  // namespace kiln
