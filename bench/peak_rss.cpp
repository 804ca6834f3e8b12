// Peak resident memory of a training step, eager against traced, for the
// models of bench/models.h (the digits CNN and the transformer block). Each
// (model, mode) runs in a fresh process of its own (this binary started again
// with --child), so no measurement's peak holds another's memory. Each child
// reads its own /proc/self/status:
//
//   setup   VmRSS once the model, its optimizer and the batch exist
//   warm-up VmHWM after the first three steps (traced: tracing and compiling
//           the step, and tracing it again once the optimizer's state exists,
//           so LLVM's memory counts here; with a warm disk cache less is
//           compiled)
//   held    VmRSS after the warm-up, once freed heap went back (malloc_trim):
//           what the process keeps between steps (optimizer state, gradients,
//           plans, loaded kernels, the allocators' cached blocks, what the
//           compiler left behind)
//   steady  VmHWM over the next `steps` steps, the high-water mark reset to
//           `held` first (5 written to /proc/self/clear_refs); steady - held
//           is what a step needs on top (activations, temporaries)
//
// and the parent prints them with the traced/eager ratios of the steady peak,
// of the steady peak above setup and of the warm-up's peak.
//
//   build/bench/bench_peak_rss [steps [batch_scale]]  (default 20 steps, the
//                                                    models' batches times 1)
//   KILN_CACHE_DIR=off build/bench/bench_peak_rss     (no disk cache: the
//                                                    traced warm-up compiles every kernel)
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/memory.h"
#include "bench/models.h"
#include "codegen/cpu_backend.h"
#include "runtime/blas.h"

namespace {

using namespace kiln;
using bench::reset_peak;
using bench::status_kib;

struct Sample {
  long setup = -1, warmup = -1, held = -1, steady = -1;
  bool reset = false;
};

// One measurement; prints "setup warm-up held steady reset" in KiB on stdout.
int child(const std::string& model, const std::string& mode, int steps, int scale) {
  if (mode != "eager" && mode != "traced") {
    std::fprintf(stderr, "bench_peak_rss: expected the mode eager or traced, got '%s'\n",
                 mode.c_str());
    return 2;
  }
  blas_init();
  const bool traced = mode == "traced";
  auto step = bench::make_model_step(model, scale);
  Sample s;
  s.setup = status_kib("VmRSS");
  Tensor loss;
  for (int i = 0; i < 3; ++i) loss = traced ? step->traced() : step->eager();
  s.warmup = status_kib("VmHWM");
  ::malloc_trim(0);
  s.held = status_kib("VmRSS");
  s.reset = reset_peak();
  for (int i = 0; i < steps; ++i) loss = traced ? step->traced() : step->eager();
  if (!std::isfinite(loss.item<double>())) {
    std::fprintf(stderr, "bench_peak_rss: %s %s: the loss is not finite\n", model.c_str(),
                 mode.c_str());
    return 1;
  }
  s.steady = status_kib("VmHWM");
  std::printf("%ld %ld %ld %ld %d\n", s.setup, s.warmup, s.held, s.steady, s.reset ? 1 : 0);
  return 0;
}

// Runs this binary as a child for one measurement and parses its line.
bool measure(const std::string& self, const std::string& model, const std::string& mode, int steps,
             int scale, Sample* out) {
  const std::string cmd = "'" + self + "' --child " + model + " " + mode + " " +
                          std::to_string(steps) + " " + std::to_string(scale);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return false;
  int reset = 0;
  const int got = std::fscanf(p, "%ld %ld %ld %ld %d", &out->setup, &out->warmup, &out->held,
                              &out->steady, &reset);
  out->reset = reset != 0;
  return ::pclose(p) == 0 && got == 5;
}

double mib(long kib) {
  return static_cast<double>(kib) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 6 && std::string(argv[1]) == "--child")
      return child(argv[2], argv[3], std::max(1, std::atoi(argv[4])),
                   std::max(1, std::atoi(argv[5])));
    const int steps = argc > 1 ? std::atoi(argv[1]) : 20, scale = argc > 2 ? std::atoi(argv[2]) : 1;
    if (argc > 3 || steps < 1 || scale < 1) {
      std::fprintf(stderr, "usage: %s [steps [batch_scale]]   (both >= 1; default 20 and 1)\n",
                   argv[0]);
      return 2;
    }
    std::vector<char> buf(4096);
    const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
    if (n <= 0) {
      std::fprintf(stderr, "bench_peak_rss: cannot read /proc/self/exe\n");
      return 1;
    }
    const std::string self(buf.data(), static_cast<size_t>(n));
    blas_init();
    std::printf(
        "bench_peak_rss: batches %d x the models' (digits_cnn %d, transformer %d), 3 "
        "warm-up steps, then %d, one process per row, MiB; %s; jit target %s; kernel "
        "cache %s\n",
        scale, 64 * scale, 16 * scale, steps, blas_info().c_str(), cpu_target_description().c_str(),
        cache_dir().empty() ? "off" : cache_dir().c_str());
    std::printf("%-12s %-7s %9s %9s %9s %9s %9s %9s\n", "model", "mode", "setup", "warm-up", "held",
                "steady", "- setup", "- held");
    bool ok = true;
    for (const char* model : {"digits_cnn", "transformer"}) {
      Sample s[2];
      const char* modes[2] = {"eager", "traced"};
      for (int m = 0; m < 2; ++m) {
        if (!measure(self, model, modes[m], steps, scale, &s[m])) {
          std::fprintf(stderr, "bench_peak_rss: the %s %s run failed\n", model, modes[m]);
          ok = false;
          continue;
        }
        std::printf("%-12s %-7s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f%s\n", model, modes[m],
                    mib(s[m].setup), mib(s[m].warmup), mib(s[m].held), mib(s[m].steady),
                    mib(s[m].steady - s[m].setup), mib(s[m].steady - s[m].held),
                    s[m].reset ? "" : "  (peak not reset: steady includes the warm-up)");
      }
      if (s[0].steady > 0 && s[1].steady > 0)
        std::printf("%-12s traced/eager: steady peak %.2f, above setup %.2f, warm-up %.2f\n", model,
                    double(s[1].steady) / double(s[0].steady),
                    double(s[1].steady - s[1].setup) / double(s[0].steady - s[0].setup),
                    double(s[1].warmup) / double(s[0].warmup));
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_peak_rss: %s\n", e.what());
    return 1;
  }
}
