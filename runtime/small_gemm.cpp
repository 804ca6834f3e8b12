// Small products through libxsmm (see small_gemm.h). libxsmm is column-major:
// the row-major c = a @ b is the column-major c^T = b^T a^T, so b goes first
// and the sizes swap (libxsmm's m, n, k = our n, m, k). A transposed a is
// libxsmm's transposed second operand, which 1.17 generates; a transposed b
// would be its first, which it does not.
#include "runtime/small_gemm.h"

#include <libxsmm.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include "runtime/env.h"

namespace kiln {
namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> on{env::flag("KILN_SMALL_GEMM", true)};
  return on;
}

// One kernel's sizes and form: what libxsmm's dispatch is asked for.
struct Key {
  int32_t m, n, k, lda, ldb, ldc;
  uint8_t is_double, trans_a, beta_one, valid;
  bool operator==(const Key& o) const { return std::memcmp(this, &o, sizeof(Key)) == 0; }
};
static_assert(std::has_unique_object_representations_v<Key>);

// libxsmm's dispatch takes a lock-free look in its registry, but measured here
// at 100-150 ns a call: as much as a whole 16 x 16 product. Each thread keeps
// the kernels it used last in a small direct-mapped table (a kernel lives as
// long as the process), a null kernel too: libxsmm has none for it.
struct Entry {
  Key key{};
  libxsmm_xmmfunction kernel{nullptr};
};
constexpr size_t kSlots = 64;

size_t slot_of(const Key& key) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(&key);
  for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return (h ^ (h >> 29)) % kSlots;
}

// libxsmm's kernels return with the upper halves of the vector registers in
// use (no vzeroupper): every SSE instruction after them, in code built for
// plain x86-64, then waits on those halves. Measured: an 8 x 8 product through
// matmul_cpu took 2.8 us instead of 0.4.
__attribute__((target("avx"))) void clear_upper_state() {
  __builtin_ia32_vzeroupper();
}

template <class T>
libxsmm_xmmfunction dispatch(const Key& key) {
  const T alpha = 1, beta = key.beta_one ? 1 : 0;
  const int flags =
      (key.trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : 0) | (key.beta_one ? 0 : LIBXSMM_GEMM_FLAG_BETA_0);
  const int prefetch = LIBXSMM_PREFETCH_NONE;
  // Column-major: c^T (n x m) = b^T (n x k) a^T (k x m).
  const libxsmm_blasint m = key.n, n = key.m, k = key.k, lda = key.ldb, ldb = key.lda,
                        ldc = key.ldc;
  libxsmm_xmmfunction f{nullptr};
  if constexpr (std::is_same_v<T, float>)
    f.smm = libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
  else
    f.dmm = libxsmm_dmmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
  return f;
}

template <class T>
bool run(bool trans_a, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
         int64_t ldb, T beta, T* c, int64_t ldc) {
  if (!enabled_flag().load(std::memory_order_relaxed)) return false;
  if (beta != T(0) && beta != T(1)) return false;
  if (m <= 0 || n <= 0 || k <= 0) return false;
  if (k * n * int64_t(sizeof(T)) > small_gemm_max_rhs_bytes()) return false;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (m > kMax || lda > kMax || ldb > kMax || ldc > kMax) return false;
  Key key{};
  key.m = int32_t(m);
  key.n = int32_t(n);
  key.k = int32_t(k);
  key.lda = int32_t(lda);
  key.ldb = int32_t(ldb);
  key.ldc = int32_t(ldc);
  key.is_double = std::is_same_v<T, double>;
  key.trans_a = trans_a;
  key.beta_one = beta == T(1);
  key.valid = 1;  // never equal to an empty slot
  thread_local Entry table[kSlots];
  Entry& e = table[slot_of(key)];
  if (!(e.key == key)) {
    e.kernel = dispatch<T>(key);
    e.key = key;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (!e.kernel.smm) return false;
    e.kernel.smm(b, a, c);
  } else {
    if (!e.kernel.dmm) return false;
    e.kernel.dmm(b, a, c);
  }
  static const bool avx = __builtin_cpu_supports("avx");
  if (avx) clear_upper_state();
  return true;
}

}  // namespace

bool small_gemm(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  return run<float>(trans_a, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

bool small_gemm(bool trans_a, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  return run<double>(trans_a, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

int64_t small_gemm_max_rhs_bytes() {
  static const int64_t limit = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? int64_t(l2) / 4 : int64_t(512) << 10;
  }();
  return limit;
}

bool small_gemm_enabled() {
  return enabled_flag().load();
}

void set_small_gemm_enabled(bool on) {
  enabled_flag().store(on);
}

std::string small_gemm_info() {
  libxsmm_init();  // settles the target it generates code for (idempotent)
  std::ostringstream os;
  os << "libxsmm " << LIBXSMM_VERSION << " (" << libxsmm_get_target_arch()
     << ") for products whose "
     << "right operand is at most " << (small_gemm_max_rhs_bytes() >> 10) << " KiB"
     << (small_gemm_enabled() ? "" : ", off (KILN_SMALL_GEMM=0)");
  return os.str();
}

}  // namespace kiln
