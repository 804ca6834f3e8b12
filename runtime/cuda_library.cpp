// The launchers of the sort, attention and cluster log-probability library
// kernels (see cuda_library.h):
// which kernels run, on what grids, with what scratch memory. The kernels
// themselves are codegen/cuda_library.cpp's.
#include "runtime/cuda_library.h"

#include <algorithm>

#include "ir/error.h"

namespace kiln {
namespace {

using namespace cuda_library;

// The suffix of a kernel for dtype t ("f32", ..., "b8").
std::string suffix(DType t) {
  return dtype_name(t);
}

// Bits of the order key of dtype t (radix passes cover only these).
int key_bits(DType t) {
  switch (t) {
    case DType::b8:
    case DType::u8:
    case DType::i8:
      return 8;
    case DType::i16:
      return 16;
    case DType::f32:
    case DType::i32:
      return 32;
    case DType::f64:
    case DType::i64:
      return 64;
  }
  throw Error(std::string("internal: a CUDA sort of ") + dtype_name(t));
}

// The radix kernels are per key width: 32-bit keys for dtypes up to 32 bits.
const char* key_suffix(DType t) {
  return key_bits(t) == 64 ? "u64" : "u32";
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A grid for `blocks` blocks' work: the kernels stride over what it leaves out.
int64_t grid_for(int64_t blocks) {
  return std::clamp<int64_t>(blocks, 1, int64_t(1) << 30);
}

const DType kSortTypes[] = {DType::f32, DType::f64, DType::i32, DType::i64,
                            DType::b8,  DType::u8,  DType::i8,  DType::i16};

// Scratch memory from the launcher, given back when the scope ends (after the
// launches that use it are queued: the launcher orders the reuse).
class Scratch {
 public:
  Scratch(CudaLibraryLauncher& l, size_t bytes) : l_(l), bytes_(std::max<size_t>(bytes, 1)) {
    p_ = l_.alloc(bytes_);
  }
  ~Scratch() { l_.free(p_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return p_; }

 private:
  CudaLibraryLauncher& l_;
  size_t bytes_;
  void* p_ = nullptr;
};

}  // namespace

const std::vector<std::string>& cuda_library_kernel_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (DType t : kSortTypes) {
      n.push_back("kiln_sort_block_" + suffix(t));
      n.push_back("kiln_sort_keys_" + suffix(t));
    }
    for (const char* k : {"u32", "u64"}) {
      n.push_back(std::string("kiln_radix_hist_") + k);
      n.push_back(std::string("kiln_radix_scatter_") + k);
    }
    n.push_back("kiln_radix_scan");
    n.push_back("kiln_sort_write");
    for (const char* t : {"f32", "f64"}) {
      n.push_back(std::string("kiln_attention_fwd_") + t);
      n.push_back(std::string("kiln_attention_stats_") + t);
      n.push_back(std::string("kiln_attention_grad_") + t);
      n.push_back(std::string("kiln_cluster_fwd_") + t);
      n.push_back(std::string("kiln_cluster_stats_") + t);
      n.push_back(std::string("kiln_cluster_dw_") + t);
    }
    return n;
  }();
  return names;
}

void* CudaLibraryFunctions::find(const char* name) const {
  for (const auto& [n, fn] : functions)
    if (n == name) return fn;
  throw Error(std::string("internal: the CUDA library kernels of cuda:") + std::to_string(device) +
              " have no kernel '" + name + "'");
}

void cuda_sort_lines(const SortLines& s, const void* in, int64_t* out, CudaLibraryLauncher& l) {
  KILN_CHECK(s.outer >= 0 && s.n >= 0 && s.inner >= 0 && s.count >= 0 && s.count <= s.n,
             "internal: sort of [", s.outer, ", ", s.n, ", ", s.inner, "] asked for ", s.count,
             " positions");
  const int64_t lines = s.outer * s.inner;
  if (lines == 0 || s.count == 0) return;
  KILN_CHECK(s.n < (int64_t(1) << 31), "a CUDA sort of lines of ", s.n,
             " elements (expected fewer than 2^31 per line)");
  KilnSortArgs a{};
  a.in = in;
  a.out = reinterpret_cast<long long*>(out);
  a.outer = s.outer;
  a.n = s.n;
  a.inner = s.inner;
  a.count = s.count;
  a.descending = s.descending ? 1 : 0;
  const std::string t = suffix(s.dtype);
  if (s.n <= kBlockSortMax) {
    int64_t width = 1;
    while (width < s.n) width *= 2;
    const int block = int(std::clamp<int64_t>(width / 2, 32, kBlockSortMax / 2));
    l.launch(("kiln_sort_block_" + t).c_str(), grid_for(lines), block, &a, sizeof a);
    return;
  }
  // Long lines: LSD radix sort over the key's bits, 4 a pass, all lines at once.
  const int64_t total = lines * s.n;
  const size_t key_bytes = key_bits(s.dtype) == 64 ? 8 : 4;
  const int64_t tile = int64_t(kRadixThreads) * kRadixItems;
  a.tiles = ceil_div(s.n, tile);
  Scratch k0(l, size_t(total) * key_bytes), k1(l, size_t(total) * key_bytes);
  Scratch p0(l, size_t(total) * 8), p1(l, size_t(total) * 8);
  Scratch hist(l, size_t(lines * 16 * a.tiles) * sizeof(unsigned));
  a.keys[0] = k0.get();
  a.keys[1] = k1.get();
  a.pos[0] = static_cast<long long*>(p0.get());
  a.pos[1] = static_cast<long long*>(p1.get());
  a.hist = static_cast<unsigned*>(hist.get());
  l.launch(("kiln_sort_keys_" + t).c_str(), grid_for(ceil_div(total, 256)), 256, &a, sizeof a);
  const std::string k = key_suffix(s.dtype);
  const std::string hist_name = "kiln_radix_hist_" + k, scatter_name = "kiln_radix_scatter_" + k;
  a.src = 0;
  for (int shift = 0; shift < key_bits(s.dtype); shift += kRadixBits) {
    a.shift = shift;
    l.launch(hist_name.c_str(), grid_for(lines * a.tiles), kRadixThreads, &a, sizeof a);
    l.launch("kiln_radix_scan", grid_for(lines), 256, &a, sizeof a);
    l.launch(scatter_name.c_str(), grid_for(lines * a.tiles), kRadixThreads, &a, sizeof a);
    a.src ^= 1;
  }
  l.launch("kiln_sort_write", grid_for(ceil_div(lines * s.count, 256)), 256, &a, sizeof a);
}

namespace {

KilnAttentionArgs attention_args(const AttentionShape& s, const void* q, const void* k,
                                 const void* v) {
  KILN_CHECK(s.dtype == DType::f32 || s.dtype == DType::f64, "internal: CUDA attention of ",
             dtype_name(s.dtype));
  KilnAttentionArgs a{};
  a.q = q;
  a.k = k;
  a.v = v;
  a.batch = s.batch;
  a.tq = s.tq;
  a.tk = s.tk;
  a.d = s.d;
  a.dv = s.dv;
  a.scale = s.scale;
  a.causal = s.causal ? 1 : 0;
  return a;
}

// Launches `kernel` over batch x ceil(rows / 16) x ceil(cols / 128) blocks.
void launch_rows(CudaLibraryLauncher& l, const std::string& kernel, KilnAttentionArgs& a,
                 int64_t rows, int64_t cols) {
  a.row_blocks = ceil_div(rows, kAttentionRows);
  a.col_blocks = std::max<int64_t>(1, ceil_div(cols, kAttentionCols));
  const int64_t blocks = a.batch * a.row_blocks * a.col_blocks;
  if (blocks == 0) return;
  l.launch(kernel.c_str(), grid_for(blocks), kAttentionThreads, &a, sizeof a);
}

}  // namespace

void cuda_attention_forward(const AttentionShape& s, const void* q, const void* k, const void* v,
                            void* out, CudaLibraryLauncher& l) {
  if (s.batch * s.tq * s.dv == 0) return;
  KilnAttentionArgs a = attention_args(s, q, k, v);
  a.dst = out;
  a.which = -1;
  launch_rows(l, std::string("kiln_attention_fwd_") + dtype_name(s.dtype), a, s.tq, s.dv);
}

void cuda_attention_backward(const AttentionShape& s, const void* q, const void* k, const void* v,
                             const void* out, const void* g, void* dq, void* dk, void* dv,
                             CudaLibraryLauncher& l) {
  if (s.batch == 0 || (!dq && !dk && !dv)) return;
  KilnAttentionArgs a = attention_args(s, q, k, v);
  a.out = out;
  a.g = g;
  const size_t row_bytes = size_t(s.batch * s.tq) * dtype_size(s.dtype);
  Scratch lse(l, row_bytes), dsum(l, row_bytes);
  a.lse = lse.get();
  a.dsum = dsum.get();
  const std::string t = dtype_name(s.dtype);
  a.which = -1;
  launch_rows(l, "kiln_attention_stats_" + t, a, s.tq, 1);
  void* const grads[3] = {dq, dk, dv};
  for (int which = 0; which < 3; ++which) {
    if (!grads[which]) continue;
    a.which = which;
    a.dst = grads[which];
    launch_rows(l, "kiln_attention_grad_" + t, a, which == 0 ? s.tq : s.tk,
                which == 2 ? s.dv : s.d);
  }
}

namespace {

KilnClusterArgs cluster_args(const ClusterShape& s, const void* h, const void* w,
                             const int64_t* t) {
  KILN_CHECK(s.dtype == DType::f32 || s.dtype == DType::f64, "internal: CUDA cluster_logprob of ",
             dtype_name(s.dtype));
  KilnClusterArgs a{};
  a.h = h;
  a.w = w;
  a.t = reinterpret_cast<const long long*>(t);
  a.rows = s.rows;
  a.width = s.width;
  a.columns = s.columns;
  a.start = s.start;
  return a;
}

}  // namespace

void cuda_cluster_logprob_forward(const ClusterShape& s, const void* h, const void* w,
                                  const int64_t* t, void* out, CudaLibraryLauncher& l) {
  if (s.rows == 0) return;
  KilnClusterArgs a = cluster_args(s, h, w, t);
  a.dst = out;
  l.launch((std::string("kiln_cluster_fwd_") + dtype_name(s.dtype)).c_str(), grid_for(s.rows),
           kClusterThreads, &a, sizeof a);
}

void cuda_cluster_logprob_backward(const ClusterShape& s, const void* h, const void* w,
                                   const int64_t* t, const void* g, void* dh, void* dw,
                                   CudaLibraryLauncher& l) {
  if (!dh && !dw) return;
  KilnClusterArgs a = cluster_args(s, h, w, t);
  a.g = g;
  Scratch lse(l, size_t(s.rows) * dtype_size(s.dtype));
  a.lse = lse.get();
  const std::string type = dtype_name(s.dtype);
  if (s.rows > 0) {
    a.dst = dh;
    l.launch(("kiln_cluster_stats_" + type).c_str(), grid_for(s.rows), kClusterThreads, &a,
             sizeof a);
  }
  if (dw && s.columns > 0) {
    a.dst = dw;
    l.launch(("kiln_cluster_dw_" + type).c_str(), grid_for(ceil_div(s.columns, kClusterThreads)),
             kClusterThreads, &a, sizeof a);
  }
}

}  // namespace kiln
