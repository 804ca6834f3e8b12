// Host emulation of generated CUDA kernels (see cuda_emulation.h): the prelude,
// the host compiler run, and the fiber scheduler behind __syncthreads and the
// warp shuffles.
#include "codegen/cuda_emulation.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "runtime/binary_io.h"
#include "runtime/env.h"

extern char** environ;

namespace kiln {
namespace {

// The prelude's structures, mirrored; kAbi checks that both sides agree.
struct EmuUint3 {
  unsigned x, y, z;
};
struct EmuThread {
  EmuUint3 thread_idx, block_idx, block_dim, grid_dim;
};
struct EmuHooks {
  const EmuThread* cur;
  void (*syncthreads)();
  unsigned long long (*shfl)(unsigned long long bits, int kind, int arg, unsigned mask);
};
constexpr int kAbi = 10000 + 100 * int(sizeof(EmuThread)) + int(sizeof(EmuHooks));

const char* const kPrelude =
    R"(// Kiln: host emulation prelude for generated CUDA C (codegen/cuda_emulation.h).
#include <math.h>
#include <string.h>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
struct kiln_emu_uint3 { unsigned x, y, z; };
struct kiln_emu_thread { kiln_emu_uint3 thread_idx, block_idx, block_dim, grid_dim; };
struct kiln_emu_hooks_t {
  const kiln_emu_thread* cur;
  void (*syncthreads)();
  unsigned long long (*shfl)(unsigned long long bits, int kind, int arg, unsigned mask);
};
extern "C" kiln_emu_hooks_t kiln_emu_hooks;
kiln_emu_hooks_t kiln_emu_hooks = {0, 0, 0};
extern "C" const int kiln_emu_abi;
const int kiln_emu_abi = 10000 + 100 * (int)sizeof(kiln_emu_thread) + (int)sizeof(kiln_emu_hooks_t);
#define threadIdx (kiln_emu_hooks.cur->thread_idx)
#define blockIdx (kiln_emu_hooks.cur->block_idx)
#define blockDim (kiln_emu_hooks.cur->block_dim)
#define gridDim (kiln_emu_hooks.cur->grid_dim)
// Other threads run inside the hooks: no memory access may move across them.
#define KILN_EMU_FENCE() __asm__ __volatile__("" ::: "memory")
static inline void __syncthreads() {
  KILN_EMU_FENCE();
  kiln_emu_hooks.syncthreads();
  KILN_EMU_FENCE();
}
template <class T> static inline T kiln_emu_shfl(unsigned mask, T v, int kind, int arg) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
  unsigned long long bits = 0;
  memcpy(&bits, &v, sizeof v);
  KILN_EMU_FENCE();
  bits = kiln_emu_hooks.shfl(bits, kind, arg, mask);
  KILN_EMU_FENCE();
  T r;
  memcpy(&r, &bits, sizeof r);
  return r;
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int = 32) {
  return kiln_emu_shfl(mask, v, 0, (int)delta);
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int = 32) {
  return kiln_emu_shfl(mask, v, 1, lane_mask);
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src_lane, int = 32) {
  return kiln_emu_shfl(mask, v, 2, src_lane);
}
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
static inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
// End of the prelude.
)";

using KernelFn = void (*)(void* const*, long long, long long);

// ---- Fiber contexts ----
//
// On x86-64 a fiber switch is a few pushes and pops (callee-saved registers and
// the stack pointer; no system call, unlike swapcontext's signal-mask save,
// which would dominate the emulation's time). Elsewhere, or with
// KILN_EMU_UCONTEXT=1 in the environment (how the tests cover it), ucontext.

#if defined(__x86_64__)
extern "C" void kiln_emu_switch(void** save_sp, void* to_sp);
asm(R"(
  .text
  .p2align 4
  .globl kiln_emu_switch
  .hidden kiln_emu_switch
  .type kiln_emu_switch, @function
kiln_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kiln_emu_switch, .-kiln_emu_switch
)");
constexpr bool kHaveFastSwitch = true;
#else
constexpr bool kHaveFastSwitch = false;
#endif

bool g_ucontext = true;  // per launch: switch with ucontext

struct Context {
  void* sp = nullptr;  // the fast switch's saved stack pointer
  ucontext_t uc;
};

// A context that starts `entry` (which must never return) on the given stack.
void context_make(Context& c, char* stack, size_t size, void (*entry)()) {
  if (g_ucontext) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
    return;
  }
  void** sp =
      reinterpret_cast<void**>((reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15));
  *--sp = nullptr;                              // entry's return address: none
  *--sp = reinterpret_cast<void*>(entry);       // where kiln_emu_switch returns to
  for (int i = 0; i < 6; ++i) *--sp = nullptr;  // rbp, rbx, r12-r15
  c.sp = sp;
}

void context_switch(Context& from, Context& to) {
#if defined(__x86_64__)
  if (!g_ucontext) {
    kiln_emu_switch(&from.sp, to.sp);
    return;
  }
#endif
  swapcontext(&from.uc, &to.uc);
}

// ---- The scheduler ----

enum class FiberState : uint8_t { ready, barrier, shuffle, done };

struct Fiber {
  Context ctx;
  FiberState state = FiberState::ready;
  EmuThread t{};
  uint32_t shuffles = 0;  // this thread's shuffle count; its parity picks the slot set
};

// Fiber stacks with a guard page below each, so an overflow faults instead of
// corrupting the neighbour.
class Stacks {
 public:
  static constexpr size_t kSize = 256 << 10;
  explicit Stacks(int n) : page_(size_t(::sysconf(_SC_PAGESIZE))), n_(size_t(n)) {
    bytes_ = n_ * (kSize + page_);
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw Error("CUDA emulation: cannot map fiber stacks");
    base_ = static_cast<char*>(p);
    for (size_t i = 0; i < n_; ++i) ::mprotect(base_ + i * (kSize + page_), page_, PROT_NONE);
  }
  ~Stacks() { ::munmap(base_, bytes_); }
  Stacks(const Stacks&) = delete;
  Stacks& operator=(const Stacks&) = delete;
  char* stack(size_t i) const { return base_ + i * (kSize + page_) + page_; }

 private:
  size_t page_, n_, bytes_ = 0;
  char* base_ = nullptr;
};

struct Launch {
  KernelFn fn = nullptr;
  void* const* buffers = nullptr;
  long long begin = 0, end = 0;
  EmuHooks* hooks = nullptr;
  int block = 0;
  std::vector<Fiber> fibers;
  Context scheduler;
  int cur = -1;
  std::vector<unsigned long long> slots;  // [warp][parity][lane]
  std::string error;
  CudaEmulationStats stats;
};

std::mutex g_launch_mu;      // one emulated launch at a time
Launch* g_launch = nullptr;  // the running launch

void yield(FiberState s) {
  Launch& l = *g_launch;
  Fiber& f = l.fibers[size_t(l.cur)];
  f.state = s;
  context_switch(f.ctx, l.scheduler);
}

// Records the error and leaves the fiber for good (its stack is dropped).
[[noreturn]] void fiber_fail(const std::string& msg) {
  Launch& l = *g_launch;
  const EmuThread& t = l.fibers[size_t(l.cur)].t;
  l.error = "thread " + std::to_string(t.thread_idx.x) + " of block " +
            std::to_string(t.block_idx.x) + ": " + msg;
  yield(FiberState::done);
  std::abort();  // never resumed
}

void fiber_main() {
  Launch& l = *g_launch;
  l.fn(l.buffers, l.begin, l.end);
  yield(FiberState::done);
  std::abort();  // never resumed
}

void hook_syncthreads() {
  ++g_launch->stats.barriers;
  yield(FiberState::barrier);
}

unsigned long long hook_shfl(unsigned long long bits, int kind, int arg, unsigned mask) {
  Launch& l = *g_launch;
  ++l.stats.shuffles;
  Fiber& f = l.fibers[size_t(l.cur)];
  const int tid = int(f.t.thread_idx.x), warp = tid / 32, lane = tid % 32;
  if (mask != 0xffffffffu) fiber_fail("a warp shuffle with a partial mask is not emulated");
  unsigned long long* slot = &l.slots[size_t(warp * 64 + int(f.shuffles & 1) * 32)];
  slot[lane] = bits;
  yield(FiberState::shuffle);
  int src = kind == 0 ? lane + arg : kind == 1 ? lane ^ arg : arg;
  if (kind == 0 && src > 31) src = lane;  // shfl_down past the warp's end: own value
  if (src < 0 || src > 31 || warp * 32 + src >= l.block)
    fiber_fail("shuffle reads lane " + std::to_string(src) + ", which does not exist");
  ++f.shuffles;
  return slot[src];
}

// Runs one block to completion; returns false with l.error set on failure.
bool run_block(Launch& l, unsigned block_idx, unsigned grid, const Stacks& stacks) {
  const int n = l.block;
  for (int t = 0; t < n; ++t) {
    Fiber& f = l.fibers[size_t(t)];
    f.state = FiberState::ready;
    f.shuffles = 0;
    f.t = {{unsigned(t), 0, 0}, {block_idx, 0, 0}, {unsigned(n), 1, 1}, {grid, 1, 1}};
    context_make(f.ctx, stacks.stack(size_t(t)), Stacks::kSize, fiber_main);
  }
  ++l.stats.blocks;
  l.stats.threads += n;
  for (;;) {
    for (int t = 0; t < n; ++t) {
      Fiber& f = l.fibers[size_t(t)];
      if (f.state != FiberState::ready) continue;
      l.cur = t;
      l.hooks->cur = &f.t;
      ++l.stats.switches;
      context_switch(l.scheduler, f.ctx);
      if (!l.error.empty()) return false;
    }
    // Every fiber now waits at a barrier or a shuffle, or is done.
    bool released = false;
    int live = 0, at_barrier = 0;
    for (int w = 0; w * 32 < n; ++w) {
      int lanes = 0, shuffling = 0;
      for (int t = w * 32; t < std::min(n, w * 32 + 32); ++t, ++lanes) {
        const FiberState s = l.fibers[size_t(t)].state;
        shuffling += s == FiberState::shuffle;
        at_barrier += s == FiberState::barrier;
        live += s != FiberState::done;
      }
      if (shuffling == 0) continue;
      if (shuffling != lanes) {
        l.error = "block " + std::to_string(block_idx) + ", warp " + std::to_string(w) +
                  ": some lanes wait at a shuffle while others are at __syncthreads or finished";
        return false;
      }
      for (int t = w * 32; t < std::min(n, w * 32 + 32); ++t)
        l.fibers[size_t(t)].state = FiberState::ready;
      released = true;
    }
    if (released) continue;
    if (live == 0) return true;
    // No shuffles wait, nothing runs: every live thread is at a barrier. A
    // barrier that finished threads never reached would hang a GPU.
    if (live != n) {
      l.error = "block " + std::to_string(block_idx) + ": __syncthreads reached by " +
                std::to_string(at_barrier) + " of " + std::to_string(n) +
                " threads; the others finished without it";
      return false;
    }
    for (Fiber& f : l.fibers)
      if (f.state == FiberState::barrier) f.state = FiberState::ready;
  }
}

// ---- The host compiler ----

std::string host_compiler() {
  if (const char* env = std::getenv("KILN_HOST_CXX"); env && *env) return env;
#ifdef KILN_HOST_CXX
  return KILN_HOST_CXX;
#else
  return "c++";
#endif
}

// Runs argv with stdout and stderr into log_path; returns the exit status (-1: no start).
int run_program(const std::vector<std::string>& args, const std::string& log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

const std::string& cuda_host_prelude() {
  static const std::string prelude = kPrelude;
  return prelude;
}

CudaHostModule::CudaHostModule(const std::vector<std::string>& sources) {
  std::string tu = cuda_host_prelude();
  std::set<std::string> seen;
  for (const std::string& s : sources)
    if (seen.insert(s).second) tu += s + "\n";

  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-cuda-emu-XXXXXX";
  if (!::mkdtemp(dir.data())) throw Error("CUDA emulation: cannot create a directory in " + dir);
  const std::string cpp = dir + "/kernels.cpp", so = dir + "/kernels.so", log = dir + "/log.txt";
  std::ofstream(cpp, std::ios::binary) << tu;
  const std::string cxx = host_compiler();
  const auto t0 = std::chrono::steady_clock::now();
  const int rc =
      run_program({cxx, "-std=c++17", "-O1", "-fPIC", "-shared", "-w", "-o", so, cpp}, log);
  compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) {
    std::string msg = io::read_file(log);
    if (msg.size() > 6000) msg = msg.substr(0, 6000) + "\n...";
    throw Error("CUDA emulation: the host compiler (" + cxx + ") " +
                (rc < 0 ? "could not run" : "rejected the generated CUDA C") + "; source kept in " +
                cpp + ":\n" + msg);
  }
  handle_ = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::error_code ec;
  if (!handle_) {
    const std::string why = ::dlerror();
    throw Error("CUDA emulation: cannot load " + so + ": " + why);
  }
  std::filesystem::remove_all(dir, ec);  // the mapping outlives the file
  hooks_ = ::dlsym(handle_, "kiln_emu_hooks");
  const int* abi = static_cast<const int*>(::dlsym(handle_, "kiln_emu_abi"));
  if (!hooks_ || !abi || *abi != kAbi) {
    ::dlclose(handle_);
    throw Error("CUDA emulation: the prelude's structures do not match the scheduler's");
  }
  auto* h = static_cast<EmuHooks*>(hooks_);
  h->syncthreads = hook_syncthreads;
  h->shfl = hook_shfl;
}

CudaHostModule::~CudaHostModule() {
  if (handle_) ::dlclose(handle_);
}

bool CudaHostModule::has_kernel(const std::string& name) const {
  return ::dlsym(handle_, name.c_str()) != nullptr;
}

CudaEmulationStats CudaHostModule::launch(const std::string& name, int grid, int block,
                                          void* const* buffers, int64_t begin, int64_t end) const {
  auto fn = reinterpret_cast<KernelFn>(::dlsym(handle_, name.c_str()));
  if (!fn) throw Error("CUDA emulation: no kernel named " + name + " in the module");
  if (grid < 1 || block < 1 || block > 1024)
    throw Error("CUDA emulation: bad launch of " + name + ": " + std::to_string(grid) +
                " blocks of " + std::to_string(block) + " threads");
  std::lock_guard<std::mutex> lock(g_launch_mu);
  Launch l;
  l.fn = fn;
  l.buffers = buffers;
  l.begin = begin;
  l.end = end;
  l.hooks = static_cast<EmuHooks*>(hooks_);
  l.block = block;
  l.fibers.resize(size_t(block));
  l.slots.assign(size_t((block + 31) / 32) * 64, 0);
  const Stacks stacks(block);
  g_ucontext = !kHaveFastSwitch || env::flag("KILN_EMU_UCONTEXT", false);
  g_launch = &l;
  bool ok = true;
  for (int b = 0; b < grid && ok; ++b) ok = run_block(l, unsigned(b), unsigned(grid), stacks);
  g_launch = nullptr;
  l.hooks->cur = nullptr;
  if (!ok) throw Error("CUDA emulation of " + name + ": " + l.error);
  return l.stats;
}

CudaEmulationStats CudaHostModule::launch(const CudaKernelSource& k, void* const* buffers,
                                          int64_t begin, int64_t end, int max_grid) const {
  if (k.launch.kind == CudaLaunch::GridStride) return launch(k.name, 3, 64, buffers, begin, end);
  const int64_t rows = std::max<int64_t>(1, end - begin);
  return launch(k.name, int(std::min<int64_t>(rows, max_grid)), k.launch.block, buffers, begin,
                end);
}

}  // namespace kiln
