// cuBLAS and cuBLASLt, loaded at run time (see cublas.h). Two X-macros list
// the functions Kiln calls; both libraries are dlopen'ed and their symbols
// resolved with dlsym into a table each (runtime/dl_table.h). Kiln's tensors
// are row-major and BLAS is column-major, so C = A B is computed as
// C^T = B^T A^T: the row-major buffers are already the column-major
// transposes, and nothing is copied.
#if KILN_HAVE_CUDA_TOOLKIT  // (else: cuda_unavailable.cpp)
#include "runtime/cublas.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "ir/error.h"
#include "runtime/allocator.h"
#include "runtime/blas.h"
#include "runtime/blas_layout.h"
#include "runtime/dl_table.h"

namespace kiln {
namespace {

// cublas_v2.h maps some names to versioned symbols (cublasCreate -> cublasCreate_v2):
// the table's fields and the looked-up symbols use the mapped names.
// clang-format off
#define KILN_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate) \
  X(cublasSetStream) \
  X(cublasGetVersion) \
  X(cublasGetStatusString) \
  X(cublasSgemmStridedBatched) \
  X(cublasDgemmStridedBatched)
#define KILN_CUBLASLT_FUNCTIONS(X) \
  X(cublasLtCreate) \
  X(cublasLtMatmulDescCreate) \
  X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) \
  X(cublasLtMatmulPreferenceCreate) \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic) \
  X(cublasLtMatmul)
// clang-format on

KILN_DL_TABLE(CublasApi, KILN_CUBLAS_FUNCTIONS, KILN_DL_AS_EXPORTED);
KILN_DL_TABLE(CublasLtApi, KILN_CUBLASLT_FUNCTIONS, KILN_DL_AS_EXPORTED);
// Both tables, so that every call reads api.<function>.
struct Api : CublasApi, CublasLtApi {};

constexpr const char* kCublasLibrary = "libcublas.so.13";
constexpr const char* kCublasLtLibrary = "libcublasLt.so.13";

constexpr size_t kLtWorkspace = size_t(32) << 20;

// A cuBLASLt matmul set up once per shape and epilogue: descriptors and the chosen algorithm.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
};
using LtKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int, int>;

struct PerDevice {
  std::once_flag once;
  cublasHandle_t handle = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  std::mutex mu;
  std::map<LtKey, LtPlan> lt_plans;
};

struct Blas {
  std::string error;
  std::string libraries;
  Api api;
  int version = 0;
  PerDevice devices[64];
};

Blas* load() {
  auto* b = new Blas();
  const std::string prefix = "cuBLAS is not available: ";
  // Where the loader finds them, else in KILN_CUBLAS_DIR, else in the CUDA
  // toolkit; global, so that libcublas finds libcublasLt (opened first).
  const char* dir = std::getenv("KILN_CUBLAS_DIR");
  const std::vector<std::string> dirs = {dir ? dir : "", "/usr/local/cuda/lib64"};
  dl::Library lt = dl::open(kCublasLtLibrary, dirs, /*global=*/true);
  dl::Library cublas = lt.handle ? dl::open(kCublasLibrary, dirs, /*global=*/true) : dl::Library{};
  std::string error = !lt.handle ? lt.error : !cublas.handle ? cublas.error : "";
  if (error.empty()) error = dl::resolve(static_cast<CublasLtApi&>(b->api), lt.path, lt.handle);
  if (error.empty())
    error = dl::resolve(static_cast<CublasApi&>(b->api), cublas.path, cublas.handle);
  if (!error.empty()) {
    b->error = prefix + error;
    return b;
  }
  b->libraries = cublas.path + ", " + lt.path;
  return b;
}

Blas& blas() {
  static Blas* b = load();
  return *b;
}

[[noreturn]] void fail(cublasStatus_t s, const char* call) {
  const Api& api = blas().api;
  throw Error(std::string("cuBLAS error: ") + call + " returned " +
              (api.cublasGetStatusString ? api.cublasGetStatusString(s)
                                         : "status " + std::to_string(static_cast<int>(s))));
}

#define KILN_CUBLAS(call)                                       \
  do {                                                          \
    cublasStatus_t kiln_s_ = (call);                            \
    if (kiln_s_ != CUBLAS_STATUS_SUCCESS) fail(kiln_s_, #call); \
  } while (0)

PerDevice& ready(int device) {
  Blas& b = blas();
  cuda::require("matmul on CUDA", device);
  if (!b.error.empty()) throw Error(b.error);
  KILN_CHECK(device < 64, "cuda:", device, ": Kiln supports 64 devices");
  PerDevice& d = b.devices[device];
  const Api& api = b.api;
  std::call_once(d.once, [&] {
    KILN_CUBLAS(api.cublasCreate(&d.handle));
    KILN_CUBLAS(api.cublasSetStream(d.handle, static_cast<cudaStream_t>(cuda::stream(device))));
    KILN_CUBLAS(api.cublasGetVersion(d.handle, &b.version));
    KILN_CUBLAS(api.cublasLtCreate(&d.lt));
    d.workspace = cuda_alloc(kLtWorkspace, device);
  });
  cuda::stream(device);  // the device's context current on this thread
  return d;
}

// v's last two dims as a matrix.
MatrixStrides matrix_of(const View& v) {
  int64_t r = v.rank();
  return {v.shape[r - 2], v.shape[r - 1], v.strides[r - 2], v.strides[r - 1]};
}

// v's element stride along each of out's batch dims (0 where v broadcasts).
std::vector<int64_t> batch_strides(const View& v, const Shape& batch) {
  std::vector<int64_t> s(batch.size(), 0);
  int64_t vb = v.rank() - 2;
  for (int64_t i = 0; i < vb; ++i) {
    size_t d = batch.size() - static_cast<size_t>(vb - i);
    s[d] = v.shape[i] == 1 ? 0 : v.strides[i];
  }
  return s;
}

// One stride over the flattened batch index, when v's batch layout has one.
bool single_stride(const std::vector<int64_t>& s, const Shape& batch, int64_t* stride) {
  int64_t expect = -1;
  *stride = 0;
  for (size_t i = batch.size(); i-- > 0;) {
    if (batch[i] == 1) continue;
    if (expect < 0) {
      *stride = s[i];
    } else if (s[i] != expect) {
      return false;
    }
    expect = s[i] * batch[i];
  }
  return true;
}

int as_int(int64_t v, const char* what) {
  KILN_CHECK(v <= INT_MAX, "matmul on CUDA: ", what, " = ", v, " exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}

template <class T>
void gemm(PerDevice& d, bool ta, bool tb, int64_t n, int64_t m, int64_t k, const T* A, int64_t lda,
          int64_t sa, const T* B, int64_t ldb, int64_t sb, T* C, int64_t sc, int64_t batch) {
  const Api& api = blas().api;
  const T one = 1, zero = 0;
  auto opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  int im = as_int(m, "columns"), in = as_int(n, "rows"), ik = as_int(k, "inner dim");
  int il = as_int(lda, "lda"), ilb = as_int(ldb, "ldb"), ib = as_int(batch, "batch");
  if constexpr (std::is_same_v<T, float>) {
    KILN_CUBLAS(api.cublasSgemmStridedBatched(d.handle, opb, opa, im, in, ik, &one, B, ilb, sb, A,
                                              il, sa, &zero, C, im, sc, ib));
  } else {
    KILN_CUBLAS(api.cublasDgemmStridedBatched(d.handle, opb, opa, im, in, ik, &one, B, ilb, sb, A,
                                              il, sa, &zero, C, im, sc, ib));
  }
}

template <class T>
void matmul_typed(PerDevice& d, const View& a, const View& b, const View& out, int device) {
  MatrixStrides ma = matrix_of(a), mb = matrix_of(b);
  const int64_t n = ma.rows, k = ma.cols, m = mb.cols;
  std::optional<BlasLayout> la = blas_layout(ma), lb = blas_layout(mb);
  KILN_CHECK(la && lb,
             "internal: matmul on CUDA needs operands with a BLAS layout (one unit stride in the "
             "last two dims)");
  const bool ta = la->trans, tb = lb->trans;
  const int64_t lda = la->ld, ldb = lb->ld;
  Shape batch(out.shape.begin(), out.shape.end() - 2);
  const int64_t nb = numel(batch);
  if (n == 0 || m == 0 || nb == 0) return;
  if (k == 0)
    return cuda::memset_zero(out.data, static_cast<size_t>(out.numel()) * sizeof(T), device);
  auto sa = batch_strides(a, batch), sb = batch_strides(b, batch);
  int64_t stride_a = 0, stride_b = 0;
  auto* A = static_cast<const T*>(a.data);
  auto* B = static_cast<const T*>(b.data);
  auto* C = static_cast<T*>(out.data);
  if (single_stride(sa, batch, &stride_a) && single_stride(sb, batch, &stride_b))
    return gemm<T>(d, ta, tb, n, m, k, A, lda, stride_a, B, ldb, stride_b, C, n * m, nb);
  // Batch dims no single stride describes: one gemm per matrix.
  for (int64_t i = 0; i < nb; ++i) {
    int64_t rest = i, oa = 0, ob = 0;
    for (size_t dim = batch.size(); dim-- > 0;) {
      int64_t idx = rest % batch[dim];
      rest /= batch[dim];
      oa += idx * sa[dim];
      ob += idx * sb[dim];
    }
    gemm<T>(d, ta, tb, n, m, k, A + oa, lda, 0, B + ob, ldb, 0, C + i * n * m, n * m, 1);
  }
}

// The elements a strided view spans from its first element.
int64_t span_of(const View& v) {
  int64_t s = 1;
  for (int64_t i = 0; i < v.rank(); ++i)
    if (v.shape[i] == 0)
      return 0;
    else
      s += (v.shape[i] - 1) * v.strides[i];
  return s;
}

// Integer and boolean products: on the host, through matmul_cpu.
void matmul_on_host(const View& a, const View& b, const View& out, int device) {
  size_t es = dtype_size(out.dtype);
  auto fetch = [&](const View& v) {
    auto buf = std::make_shared<std::vector<char>>(static_cast<size_t>(span_of(v)) * es);
    cuda::copy_to_host(buf->data(), v.data, buf->size(), device);
    return buf;
  };
  auto ha = fetch(a), hb = fetch(b);
  std::vector<char> ho(static_cast<size_t>(out.numel()) * es);
  matmul_cpu(View{ha->data(), a.dtype, a.shape, a.strides},
             View{hb->data(), b.dtype, b.shape, b.strides},
             dense_view(ho.data(), out.dtype, out.shape));
  cuda::copy_to_device(out.data, ho.data(), ho.size(), device);
  cuda::synchronize(device);
}

// The largest power of two (up to 256) dividing every pointer: cuBLASLt picks
// algorithms for the alignment it is promised (256 bytes unless told otherwise).
uint32_t common_alignment(std::initializer_list<const void*> ptrs) {
  uint32_t a = 256;
  for (const void* p : ptrs)
    while (p && reinterpret_cast<uintptr_t>(p) % a) a /= 2;
  return a;
}

LtPlan& lt_plan(PerDevice& d, bool ta, bool tb, int64_t n, int64_t m, int64_t k, int64_t lda,
                int64_t ldb, cublasLtEpilogue_t epi, uint32_t align) {
  LtKey key{ta, tb, n, m, k, lda, ldb, static_cast<int>(epi), static_cast<int>(align)};
  auto it = d.lt_plans.find(key);
  if (it != d.lt_plans.end()) return it->second;
  const Api& api = blas().api;
  LtPlan p;
  const cudaDataType_t t = CUDA_R_32F;
  KILN_CUBLAS(api.cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, t));
  // Column-major: D (m x n) = op(B^T) (m x k) * op(A^T) (k x n).
  cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  KILN_CUBLAS(
      api.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
  KILN_CUBLAS(
      api.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
  KILN_CUBLAS(
      api.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  KILN_CUBLAS(api.cublasLtMatrixLayoutCreate(&p.la, t, tb ? u(k) : u(m), tb ? u(m) : u(k), ldb));
  KILN_CUBLAS(api.cublasLtMatrixLayoutCreate(&p.lb, t, ta ? u(n) : u(k), ta ? u(k) : u(n), lda));
  KILN_CUBLAS(api.cublasLtMatrixLayoutCreate(&p.lc, t, u(m), u(n), m));
  cublasLtMatmulPreference_t pref = nullptr;
  KILN_CUBLAS(api.cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = kLtWorkspace;
  KILN_CUBLAS(api.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    KILN_CUBLAS(api.cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  KILN_CUBLAS(api.cublasLtMatmulAlgoGetHeuristic(d.lt, p.desc, p.la, p.lb, p.lc, p.lc, pref, 1,
                                                 &result, &found));
  KILN_CHECK(found > 0, "cuBLASLt has no algorithm for a ", n, "x", k, " by ", k, "x", m,
             " product with this epilogue");
  p.algo = result.algo;
  return d.lt_plans.emplace(key, p).first->second;
}

}  // namespace

void matmul_cuda(const View& a, const View& b, const View& out, int device) {
  KILN_CHECK(a.rank() >= 2 && b.rank() >= 2 && out.rank() >= 2,
             "internal: matmul on CUDA takes operands of rank >= 2");
  if (out.dtype != DType::f32 && out.dtype != DType::f64) return matmul_on_host(a, b, out, device);
  PerDevice& d = ready(device);
  std::lock_guard<std::mutex> lock(d.mu);
  if (out.dtype == DType::f32) return matmul_typed<float>(d, a, b, out, device);
  matmul_typed<double>(d, a, b, out, device);
}

bool cublaslt_supports(const View& a, const View& b, const View& out) {
  if (out.dtype != DType::f32) return false;
  if (a.dtype != out.dtype || b.dtype != out.dtype || a.rank() < 2 || b.rank() < 2) return false;
  for (const View* v : {&a, &b, &out})
    for (int64_t i = 0; i + 2 < v->rank(); ++i)
      if (v->shape[i] != 1) return false;
  MatrixStrides ma = matrix_of(a), mb = matrix_of(b);
  return ma.rows > 0 && mb.cols > 0 && ma.cols > 0 && blas_layout(ma) && blas_layout(mb);
}

void matmul_cuda_epilogue(const View& a, const View& b, const View& out, const GemmEpilogue& e,
                          int device) {
  KILN_CHECK(cublaslt_supports(a, b, out), "internal: cuBLASLt cannot compute this product");
  PerDevice& d = ready(device);
  std::lock_guard<std::mutex> lock(d.mu);
  MatrixStrides ma = matrix_of(a), mb = matrix_of(b);
  const BlasLayout la = *blas_layout(ma), lb = *blas_layout(mb);
  cublasLtEpilogue_t epi = e.bias ? (e.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                  : (e.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  uint32_t align = common_alignment({a.data, b.data, out.data, e.bias});
  LtPlan& p = lt_plan(d, la.trans, lb.trans, ma.rows, mb.cols, ma.cols, la.ld, lb.ld, epi, align);
  const Api& api = blas().api;
  if (e.bias)
    KILN_CUBLAS(api.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &e.bias, sizeof(e.bias)));
  const float one = 1, zero = 0;
  KILN_CUBLAS(api.cublasLtMatmul(d.lt, p.desc, &one, b.data, p.la, a.data, p.lb, &zero, out.data,
                                 p.lc, out.data, p.lc, &p.algo, d.workspace, kLtWorkspace,
                                 static_cast<cudaStream_t>(cuda::stream(device))));
}

bool cublas_available() {
  return cuda::available() && blas().error.empty();
}

std::string cublas_unavailable_reason() {
  if (!blas().error.empty()) return blas().error;
  return cuda::available() ? "" : cuda::unavailable_reason();
}

std::string cublas_info() {
  if (!cublas_available()) return cublas_unavailable_reason();
  ready(0);
  int v = blas().version;
  return "cuBLAS " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100) + " (" + blas().libraries + ")";
}

std::vector<cuda::EntryPoint> cublas_entry_points() {
  const Api& api = blas().api;
  std::vector<cuda::EntryPoint> out = dl::entry_points(static_cast<const CublasApi&>(api));
  for (const auto& e : dl::entry_points(static_cast<const CublasLtApi&>(api))) out.push_back(e);
  return out;
}

}  // namespace kiln
#endif
