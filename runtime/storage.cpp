// Storage: owned blocks from the caching CPU or CUDA allocator, or wrapped foreign memory.
#include "runtime/storage.h"

#include "ir/error.h"
#include "runtime/allocator.h"

namespace kiln {

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = device.is_cpu() ? cpu_alloc(bytes) : cuda_alloc(bytes, device.index);
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
  } else if (device_.is_cpu()) {
    cpu_free(data_, bytes_);
  } else {
    cuda_free(data_, bytes_, device_.index);
  }
}

}  // namespace kiln
