// nvrtc_compile and nvrtc_version (cuda_backend.h): CUDA C -> PTX (and a cubin,
// which NVRTC gets from ptxas) for one architecture, with a disk cache. The
// only file that includes nvrtc.h; built without it when CMake found no CUDA
// toolkit (KILN_HAVE_NVRTC unset), and then every call says so.
//
// Options: --gpu-architecture=compute_XX for PTX only, sm_XX when a cubin is
// wanted (NVRTC then returns both); --std=c++17; -default-device. No
// --use_fast_math: kernels keep the math library's accuracy (and denormals).
//
// Cache entries (runtime/object_cache.h: atomic writes, checksummed) are keyed
// by a hash of the source, kernel name, options and NVRTC version; the payload
// is three little-endian u64 sizes followed by the PTX, NVRTC's log and the cubin.
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/cuda_backend.h"
#include "ir/error.h"
#include "runtime/object_cache.h"

#if KILN_HAVE_NVRTC
#include <nvrtc.h>
#endif

namespace kiln {
namespace {

#if KILN_HAVE_NVRTC

constexpr const char* kCacheFormat = "kiln-nvrtc-cache 1";

std::vector<std::string> options(int arch, bool want_cubin) {
  return {
      std::string("--gpu-architecture=") + (want_cubin ? "sm_" : "compute_") + std::to_string(arch),
      "--std=c++17", "-default-device"};
}

std::string pack(const CudaBinary& b) {
  std::string out;
  for (uint64_t n : {uint64_t(b.ptx.size()), uint64_t(b.log.size()), uint64_t(b.cubin.size())})
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out += b.ptx;
  out += b.log;
  out.append(b.cubin.data(), b.cubin.size());
  return out;
}

// Why binary b is not kernel `name`'s ("" when it is): no PTX entry point of
// that name, or (when a cubin is wanted) no ELF cubin holding the name.
std::string not_holding(const CudaBinary& b, const std::string& name, bool want_cubin) {
  if (b.ptx.find(".entry " + name + "(") == std::string::npos)
    return "the PTX has no entry point '" + name + "' (another kernel's, or not PTX)";
  if (want_cubin) {
    const std::string_view cubin(b.cubin.data(), b.cubin.size());
    if (!cubin.starts_with("\177ELF") || cubin.find(name) == std::string_view::npos)
      return "the cubin is not an ELF object holding kernel '" + name + "'";
  }
  return "";
}

// The binary in a cache entry's payload, or why it cannot be this kernel's:
// sizes that do not add up, no PTX entry point named `name`, or (when a cubin
// is wanted) no ELF cubin holding the name. Another kernel's entry, or garbage
// under a valid header and checksum, is caught here rather than by every call.
std::string unpack(const std::string& payload, const std::string& name, bool want_cubin,
                   CudaBinary* b) {
  uint64_t n[3];
  if (payload.size() < sizeof n) return "bad PTX/cubin payload (no sizes)";
  std::memcpy(n, payload.data(), sizeof n);
  const uint64_t rest = payload.size() - sizeof n;
  if (n[0] > rest || n[1] > rest - n[0] || n[2] != rest - n[0] - n[1])
    return "bad PTX/cubin payload (its sizes do not add up)";
  size_t at = sizeof n;
  b->ptx = payload.substr(at, n[0]);
  at += n[0];
  b->log = payload.substr(at, n[1]);
  at += n[1];
  b->cubin.assign(payload.data() + at, payload.data() + at + n[2]);
  return not_holding(*b, name, want_cubin);
}

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS)
    throw Error(std::string("NVRTC: ") + what + ": " + nvrtcGetErrorString(r));
}

std::string supported_archs() {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> archs(size_t(n), 0);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  std::string s;
  for (int a : archs) s += (s.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return s;
}

bool arch_supported(int arch) {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return true;  // let NVRTC say
  std::vector<int> archs(size_t(n), 0);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return true;
  for (int a : archs)
    if (a == arch) return true;
  return false;
}

// Owns an nvrtcProgram.
struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};

CudaBinary compile(const std::string& source, const std::string& name, int arch, bool want_cubin) {
  if (!arch_supported(arch))
    throw Error("NVRTC " + nvrtc_version() + " cannot compile for sm_" + std::to_string(arch) +
                "; it supports " + supported_archs());
  Program prog;
  const std::string file = (name.empty() ? std::string("kernel") : name) + ".cu";
  check(nvrtcCreateProgram(&prog.p, source.c_str(), file.c_str(), 0, nullptr, nullptr),
        "creating a program");
  const std::vector<std::string> opts = options(arch, want_cubin);
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog.p, int(argv.size()), argv.data());
  CudaBinary out;
  out.arch = arch;
  size_t n = 0;
  if (nvrtcGetProgramLogSize(prog.p, &n) == NVRTC_SUCCESS && n > 1) {
    out.log.resize(n);
    nvrtcGetProgramLog(prog.p, out.log.data());
    out.log.resize(n - 1);  // the terminating NUL
  }
  if (r != NVRTC_SUCCESS)
    throw Error("NVRTC failed to compile " + file + " for sm_" + std::to_string(arch) + " (" +
                nvrtcGetErrorString(r) + "):\n" + out.log);
  check(nvrtcGetPTXSize(prog.p, &n), "PTX size");
  out.ptx.resize(n);
  check(nvrtcGetPTX(prog.p, out.ptx.data()), "PTX");
  if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  if (want_cubin) {
    check(nvrtcGetCUBINSize(prog.p, &n), "cubin size");
    out.cubin.resize(n);
    check(nvrtcGetCUBIN(prog.p, out.cubin.data()), "cubin");
  }
  return out;
}

#endif  // KILN_HAVE_NVRTC

}  // namespace

std::string nvrtc_version() {
#if KILN_HAVE_NVRTC
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "";
  return std::to_string(major) + "." + std::to_string(minor);
#else
  return "";
#endif
}

CudaBinary nvrtc_compile(const std::string& source, const std::string& name, int arch,
                         bool want_cubin, const std::string& cache_dir) {
#if KILN_HAVE_NVRTC
  std::string key;
  if (!cache_dir.empty()) {
    std::string key_text = std::string(kCacheFormat) + "\nnvrtc " + nvrtc_version() + "\n";
    for (const std::string& o : options(arch, want_cubin)) key_text += o + "\n";
    key_text += name + "\n" + source;
    key = stable_hash_hex(key_text);
    const ObjectCache cache(cache_dir);
    if (std::optional<std::string> payload = cache.load(key)) {
      CudaBinary b;
      const std::string why = unpack(*payload, name, want_cubin, &b);
      if (why.empty()) {
        b.arch = arch;
        b.from_disk_cache = true;
        b.cache_key = key;
        return b;
      }
      cache.discard(key, why);
    }
  }
  CudaBinary b = compile(source, name, arch, want_cubin);
  // What a later load would reject (e.g. `name` is no kernel of the source) is an
  // error now, not a cache entry that is discarded as damaged by every process.
  if (const std::string why = not_holding(b, name, want_cubin); !why.empty())
    throw Error("internal: NVRTC compiled " + name + " for sm_" + std::to_string(arch) + ", but " +
                why);
  if (!cache_dir.empty()) ObjectCache(cache_dir).store(key, pack(b));
  b.cache_key = key;
  return b;
#else
  (void)source;
  (void)arch;
  (void)want_cubin;
  (void)cache_dir;
  throw Error("cannot compile CUDA kernel " + name +
              ": this Kiln was built without the CUDA toolkit, so it has no NVRTC "
              "(install the toolkit and reconfigure with CMake)");
#endif
}

}  // namespace kiln
