// Storage: owned blocks from the caching CPU allocator, or wrapped foreign memory.
#include "runtime/storage.h"

#include "ir/error.h"
#include "runtime/allocator.h"

namespace kiln {

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  KILN_CHECK(device.is_cpu(), "cannot allocate ", bytes, " bytes on ", device.str(),
             ": CUDA storage is not available yet (this build runs on the CPU only)");
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = cpu_alloc(bytes);
  s->bytes_ = bytes;
  s->device_ = device;
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t bytes, Device device,
                                       std::function<void(void*)> deleter) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->bytes_ = bytes;
  s->device_ = device;
  // An empty deleter_ means "ours, back to the cache"; memory we do not own gets a no-op.
  s->deleter_ = deleter ? std::move(deleter) : [](void*) {};
  return s;
}

Storage::~Storage() {
  if (deleter_) {
    deleter_(data_);
  } else {
    cpu_free(data_, bytes_);
  }
}

}  // namespace kiln
