// Small products through libxsmm (see small_gemm.h). libxsmm is column-major:
// the row-major c = a @ b is the column-major c^T = b^T a^T, so b goes first
// and the sizes swap (libxsmm's m, n, k = our n, m, k). A transposed a is
// libxsmm's transposed second operand, which 1.17 generates; a transposed b
// would be its first, which it does not.
#include "runtime/small_gemm.h"

#include <libxsmm.h>
#include <libxsmm_generator.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>
#include <type_traits>
#include <unordered_map>

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

uint64_t hash_of(const Key& key) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(&key);
  for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

struct KeyHash {
  size_t operator()(const Key& key) const { return size_t(hash_of(key)); }
};

// The kernels of this process, made with libxsmm's code generator rather than
// through its dispatch: the dispatch's registry (room for 131072 kernels) is
// mapped and filled by its first call (libxsmm_init: 10 MiB, locked into memory
// where the process may lock pages), measured at 4.5-6 ms of CPU, the largest
// part of a first call with a warm disk cache; the CPU's id and one kernel take
// 0.1 ms. The code is the bytes libxsmm's dispatch returns for the same
// descriptor. A kernel lives as long as the process, in pages of its own; a
// null kernel is kept too (libxsmm has none for it).
class KernelStore {
 public:
  static KernelStore& get() {
    static KernelStore* store = new KernelStore();  // never destroyed: kernels may run during exit
    return *store;
  }

  // libxsmm's instruction-set id for this CPU (libxsmm_cpuid.h).
  int arch() const { return arch_; }

  void* find_or_make(const Key& key, const libxsmm_gemm_descriptor* desc) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = code_.try_emplace(key, nullptr);
    if (added && desc) it->second = generate(key, *desc);
    return it->second;
  }

 private:
  // As large as libxsmm's own buffer for one kernel (LIBXSMM_CODE_MAXSIZE);
  // the generator reports an error rather than write past it.
  static constexpr unsigned kCodeBufferBytes = 128 << 10;

  // The code for `desc` (key's product) copied into pages of its own made
  // executable, or null where libxsmm generates none: a CPU without SSE3, or an error.
  void* generate(const Key& key, const libxsmm_gemm_descriptor& desc) {
    if (arch_ < LIBXSMM_X86_SSE3) return nullptr;
    libxsmm_generated_code g{};
    g.generated_code = buffer_.get();
    g.buffer_size = kCodeBufferBytes;
    g.code_type = 2;  // machine code
    g.arch = arch_;
    // libxsmm's dispatch generates the tiniest products (m k, k n or m n at
    // most 16) for AVX2 on an AVX-512 CPU.
    const int64_t m = key.m, n = key.n, k = key.k;
    if (arch_ > LIBXSMM_X86_AVX2 && (m * k <= 16 || k * n <= 16 || m * n <= 16))
      g.arch = LIBXSMM_X86_AVX2;
    libxsmm_generator_gemm_kernel(&g, &desc);
    if (g.last_error != 0 || g.code_size == 0) return nullptr;
    void* code =
        mmap(nullptr, g.code_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) return nullptr;
    std::memcpy(code, buffer_.get(), g.code_size);
    if (mprotect(code, g.code_size, PROT_READ | PROT_EXEC) != 0) {
      munmap(code, g.code_size);
      return nullptr;
    }
    return code;
  }

  const int arch_ = libxsmm_cpuid();
  std::mutex mu_;
  std::unique_ptr<char[]> buffer_ = std::make_unique<char[]>(kCodeBufferBytes);
  std::unordered_map<Key, void*, KeyHash> code_;
};

// A look in the store takes a lock and a hash; libxsmm's own lock-free
// registry took 100-150 ns a call, measured here: as much as a whole 16 x 16
// product. Each thread keeps the kernels it used last in a small direct-mapped
// table (a kernel lives as long as the process), a null kernel too: libxsmm
// has none for it.
struct Entry {
  Key key{};
  libxsmm_xmmfunction kernel{nullptr};
};
constexpr size_t kSlots = 64;

size_t slot_of(const Key& key) {
  return hash_of(key) % kSlots;
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
  const int prefetch = LIBXSMM_GEMM_PREFETCH_NONE;
  // Column-major: c^T (n x m) = b^T (n x k) a^T (k x m).
  const libxsmm_blasint m = key.n, n = key.m, k = key.k, lda = key.ldb, ldb = key.lda,
                        ldc = key.ldc;
  libxsmm_descriptor_blob blob;
  const libxsmm_gemm_descriptor* desc;  // null: libxsmm takes no such product
  if constexpr (std::is_same_v<T, float>)
    desc =
        libxsmm_sgemm_descriptor_init(&blob, m, n, k, lda, ldb, ldc, alpha, beta, flags, prefetch);
  else
    desc =
        libxsmm_dgemm_descriptor_init(&blob, m, n, k, lda, ldb, ldc, alpha, beta, flags, prefetch);
  libxsmm_xmmfunction f{nullptr};
  f.xmm = reinterpret_cast<decltype(f.xmm)>(KernelStore::get().find_or_make(key, desc));
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

bool small_gemm_full_speed(int64_t cols, int64_t elem) {
  static const bool slow_masks =
      __builtin_cpu_is("amd") && KernelStore::get().arch() < LIBXSMM_X86_AVX512;
  return !slow_masks || cols * elem % 16 == 0;
}

std::string small_gemm_info() {
  std::ostringstream os;
  os << "libxsmm " << LIBXSMM_VERSION << " (" << libxsmm_cpuid_name(KernelStore::get().arch())
     << ") for products whose "
     << "right operand is at most " << (small_gemm_max_rhs_bytes() >> 10) << " KiB"
     << (small_gemm_enabled() ? "" : ", off (KILN_SMALL_GEMM=0)")
     << (small_gemm_full_speed(1, 4) ? ""
                                     : "; rows ending in part of a 16-byte register go to OpenBLAS "
                                       "(libxsmm's masked stores are slow on this CPU)");
  return os.str();
}

}  // namespace kiln
