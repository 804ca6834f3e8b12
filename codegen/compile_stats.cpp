// Compile figures summed (see compile_stats.h).
#include "codegen/compile_stats.h"

#include <algorithm>
#include <sstream>

#include "codegen/compile.h"

namespace kiln {

void CompileStats::add(const CompileReport& r, size_t steps, double ms) {
  compile_ms += ms;
  kernels += static_cast<int64_t>(steps);
  kernels_from_disk += r.kernels_from_disk;
  kernels_reused += r.kernels_reused;
  kernels_templated += r.kernels_templated;
  kernels_streaming += r.kernels_streaming;
  for (size_t i = 0; i < r.kernels.size() && i < r.artifacts.size(); ++i)
    if (const KernelArtifacts& a = r.artifacts[i]; a.compile_ms > 0) {
      const bool compiled = !a.reused && !a.from_disk_cache;
      kernels_compiled += compiled;
      keep_recent(kernel_compile_ms, {r.kernels[i].name, a.compile_ms, compiled}, kRecentKernels);
    }
  phases += r.kernel_times;
  kernel_phases = phases.str();
}

std::string CompileStats::str() const {
  std::ostringstream os;
  os << "compile " << compile_ms << " ms, kernels " << kernels;
  if (kernels_from_disk || kernels_reused)
    os << " (" << kernels_reused << " reused, " << kernels_from_disk << " from the disk cache)";
  if (kernels_streaming) os << ", " << kernels_streaming << " with streaming stores";
  return os.str();
}

std::string CompileStats::kernels_str() const {
  if (kernel_compile_ms.empty()) return "";
  std::vector<double> ms;  // of the recent kernels LLVM compiled
  const KernelCompile* slowest = nullptr;
  for (const KernelCompile& k : kernel_compile_ms) {
    if (!k.compiled) continue;
    ms.push_back(k.ms);
    if (!slowest || k.ms > slowest->ms) slowest = &k;
  }
  std::sort(ms.begin(), ms.end());
  std::ostringstream os;
  os << "CPU kernels: " << kernels_compiled << " compiled";
  if (slowest)
    os << " (median " << ms[ms.size() / 2] << " ms, slowest " << slowest->name << " " << slowest->ms
       << " ms)";
  os << "; " << kernel_phases;
  return os.str();
}

}  // namespace kiln
