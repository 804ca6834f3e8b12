// The CUDA strided copy (see cuda_copy.h): one hand-written kernel over up to
// 8 dims, compiled with NVRTC once per architecture.
#include "codegen/cuda_copy.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "codegen/cuda_backend.h"
#include "codegen/cuda_compile.h"
#include "ir/error.h"
#include "runtime/cuda_driver.h"

namespace kiln {

namespace {

constexpr int kMaxCopyRank = 8;

const char* kStridedCopySource = R"(
struct KilnCopyArgs {
  long long n;
  int rank;
  long long shape[8], src[8], dst[8];
};
template <class T>
__device__ void kiln_copy(const T* __restrict__ s, T* __restrict__ d, const KilnCopyArgs& a) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n;
       i += gridDim.x * (long long)blockDim.x) {
    long long rest = i, so = 0, dof = 0;
    for (int k = a.rank - 1; k >= 0; --k) {
      long long idx = rest % a.shape[k];
      rest /= a.shape[k];
      so += idx * a.src[k];
      dof += idx * a.dst[k];
    }
    d[dof] = s[so];
  }
}
extern "C" __global__ void kiln_strided_copy_1(const unsigned char* s, unsigned char* d, KilnCopyArgs a) { kiln_copy(s, d, a); }
extern "C" __global__ void kiln_strided_copy_2(const unsigned short* s, unsigned short* d, KilnCopyArgs a) { kiln_copy(s, d, a); }
extern "C" __global__ void kiln_strided_copy_4(const unsigned int* s, unsigned int* d, KilnCopyArgs a) { kiln_copy(s, d, a); }
extern "C" __global__ void kiln_strided_copy_8(const unsigned long long* s, unsigned long long* d, KilnCopyArgs a) { kiln_copy(s, d, a); }
)";

struct CopyArgs {
  long long n;
  int rank;
  long long shape[kMaxCopyRank], src[kMaxCopyRank], dst[kMaxCopyRank];
};

// Drops size-1 dims and merges dims that are adjacent in both layouts.
int collapse(const Shape& shape, const Strides& src, const Strides& dst, CopyArgs* a) {
  std::vector<int64_t> s, ss, ds;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!s.empty() && ss.back() == src[d] * shape[d] && ds.back() == dst[d] * shape[d]) {
      s.back() *= shape[d];
      ss.back() = src[d];
      ds.back() = dst[d];
      continue;
    }
    s.push_back(shape[d]);
    ss.push_back(src[d]);
    ds.push_back(dst[d]);
  }
  if (s.size() > kMaxCopyRank) return -1;
  for (size_t d = 0; d < s.size(); ++d) {
    a->shape[d] = s[d];
    a->src[d] = ss[d];
    a->dst[d] = ds[d];
  }
  a->rank = static_cast<int>(s.size());
  return a->rank;
}

void* copy_kernel(size_t elem_bytes, int device, const std::string& cache_dir) {
  static std::mutex mu;
  static std::unordered_map<int, std::string> images;  // by architecture
  int arch = cuda_arch(Device(kCUDA, device));
  std::string image;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = images.find(arch);
    if (it == images.end()) {
      CudaBinary bin =
          nvrtc_compile(kStridedCopySource, "kiln_strided_copy_8", arch, true, cache_dir);  // and _1, _2, _4
      it = images
               .emplace(arch, bin.cubin.empty() ? bin.ptx
                                                : std::string(bin.cubin.begin(), bin.cubin.end()))
               .first;
    }
    image = it->second;
  }
  return cuda::load_function(image, "kiln_strided_copy_" + std::to_string(elem_bytes), device);
}

}  // namespace

void cuda_strided_copy(const View& src, const View& dst, int device,
                       const std::string& cache_dir) {
  CopyArgs a{};
  a.n = src.numel();
  if (a.n == 0) return;
  if (collapse(src.shape, src.strides, dst.strides, &a) < 0)
    throw Error("a strided copy on CUDA of shape " + shape_str(src.shape) + " has more than " +
                std::to_string(kMaxCopyRank) + " dims that cannot be merged (expected at most 8)");
  size_t es = dtype_size(src.dtype);
  if (a.rank <= 1 && (a.rank == 0 || (a.src[0] == 1 && a.dst[0] == 1)))
    return cuda::copy_device(dst.data, src.data, static_cast<size_t>(a.n) * es, device);
  void* fn = copy_kernel(es, device, cache_dir);
  const void* s = src.data;
  void* d = dst.data;
  void* params[] = {&s, &d, &a};
  int64_t blocks =
      std::min<int64_t>((a.n + 255) / 256, int64_t(cuda::device_info(device).sm_count) * 32);
  cuda::launch(fn, static_cast<unsigned>(std::max<int64_t>(blocks, 1)), 256, 0, params, device);
}

}  // namespace kiln
