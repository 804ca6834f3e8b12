// TensorAccessor: indexed access to a CPU tensor's elements in place
// (libtorch's x.accessor<float, 2>()), for loops over small tensors:
//   auto a = x.accessor<float, 2>();
//   for (int64_t i = 0; i < a.size(0); ++i) a[i][0] = 1;
// It holds a pointer into the tensor's storage, its sizes and strides; keep the
// tensor alive while it is used. Indices are not checked, as in libtorch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "frontend/tensor.h"

namespace kiln {

template <class T, size_t N>
class TensorAccessor {
 public:
  TensorAccessor(T* data, const int64_t* sizes, const int64_t* strides)
      : data_(data), sizes_(sizes), strides_(strides) {}
  /// The sub-accessor at index i of the first dim (an element reference when N is 1).
  decltype(auto) operator[](int64_t i) const {
    if constexpr (N == 1)
      return data_[i * strides_[0]];
    else
      return TensorAccessor<T, N - 1>(data_ + i * strides_[0], sizes_ + 1, strides_ + 1);
  }
  int64_t size(int64_t d) const { return sizes_[d]; }
  int64_t stride(int64_t d) const { return strides_[d]; }
  T* data() const { return data_; }

 private:
  T* data_;
  const int64_t* sizes_;
  const int64_t* strides_;
};

namespace detail {
/// Checks that `t` can be read as a CPU T array of rank n (eager, defined, its
/// dtype T's); throws kiln::Error saying what differs.
void check_accessor(const Tensor& t, DType want, size_t n);
}  // namespace detail

template <class T, size_t N>
TensorAccessor<T, N> Tensor::accessor() const& {
  static_assert(N > 0, "accessor<T, N>() needs N >= 1 (use item<T>() for a 0-d tensor)");
  detail::check_accessor(*this, dtype_of<T>(), N);
  return TensorAccessor<T, N>(data_ptr<T>(), sizes().data(), strides().data());
}

}  // namespace kiln
