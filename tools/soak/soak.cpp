// kiln-soak: a long run of traced and eager training side by side, under the
// conditions a long-lived program meets (issue #32, README "What Kiln guarantees").
//   kiln-soak                    20 minutes, seed 1, 2 worker threads
//   kiln-soak --minutes 60 --seed 7 --threads 3 --report 30
//   kiln-soak --seconds 15       the short run CTest keeps working (soak_smoke)
//
// Each worker thread trains, round after round, a fresh model (an MLP or a small
// conv net, f32 or f64, with dropout) with Adam twice from the same parameters,
// data and dropout seed: eagerly, and with the whole step traced (jit). Batch
// sizes change every epoch and the last batch of an epoch is ragged, so the
// batch dimension becomes dynamic and new sizes compile in the background while
// their calls run eagerly. Every worker also calls one traced function shared by
// all threads (cache of 4 signatures, so it keeps evicting and recompiling).
// Every round makes new traced functions, whose kernels come from the disk cache
// (KILN_CACHE_DIR, a temporary directory) that a second process, started from
// this program (--damager), keeps damaging; now and then it wipes it.
//
// Traced must equal eager. Rounding differs between compiled and reference
// kernels, and training amplifies it, so the checks are built to be exact
// where they can be and never to fail on rounding:
//  - every step: the traced loss against the eager loss, and the shared
//    function against its eager body (f32: 1e-4 relative for losses, 1e-5 for
//    the shared function; f64: 1e-9 and 1e-12);
//  - every 10 steps, in f64 rounds: every parameter, gradient and Adam state
//    tensor within 1e-9 relative (+1e-12); in all rounds, the dropout streams at
//    the same offset. Then the traced model takes the eager one's parameters and
//    Adam state, so differences never compound over a long run (f32 parameters
//    are not compared element-wise: Adam turns a rounding-level gradient near
//    zero into a step of up to lr; the loss, which such a step barely moves, is
//    compared instead).
// Memory is sampled every second: RSS (after malloc_trim), Kiln's allocator
// (tensors alive, free blocks cached), live custom calls, loaded kernels. After a
// warm-up (the first fifth of the run), RSS less the allocator's free blocks, and
// the tensors alive, must each grow less than 8 MiB (median of the window's last
// fifth against its first); windows under 90 s (runs under 2 minutes) are not judged. The free
// blocks are reported, not judged: the caching allocator keeps each size class's
// high-water mark of blocks (capped by KILN_CPU_CACHE_MB), which creeps up as
// rarer peaks of the two threads coincide, and is reused, not leaked.
//
// Exits 0 (PASS) or 1 (FAIL: a mismatch, an unexpected exception, memory that
// grows, a damager that died, or, in runs of 2 minutes or more, a damager whose
// damage Kiln never read); 2 on a usage error.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include <kiln/kiln.h>

#include "frontend/settings.h"
#include "tools/soak/damager.h"
#include "tools/soak/monitor.h"
#include "tools/soak/workload.h"

namespace kiln::soak {
namespace {

struct Options {
  double minutes = 20, seconds = -1;
  uint64_t seed = 1;
  int threads = 2;
  double report_s = 60;
  double memory_limit_mib = 8;
  int64_t steps_per_round = 200;
  std::string damager_dir;
  pid_t parent = 0;
  double duration_s() const { return seconds >= 0 ? seconds : minutes * 60; }
};

using Clock = std::chrono::steady_clock;

std::string clock_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%3d:%02d", int(s) / 60, int(s) % 60);
  return buf;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

double max_f32(const Counters& c) {
  return std::max(c.loss_f32.get(), c.shared_f32.get());
}
double max_f64(const Counters& c) {
  return std::max({c.loss_f64.get(), c.state_f64.get(), c.shared_f64.get()});
}

std::string status_line(double t, const Counters& c, const StderrTap& tap, const MemorySample& m) {
  std::ostringstream os;
  os << "[" << clock_text(t) << "] steps " << c.steps_eager << " eager / " << c.steps_traced
     << " traced, shared calls " << c.shared_calls << ", rounds " << c.rounds << ", recompiles "
     << c.misses << " (background " << c.background_compiles << "), cache damage reports "
     << tap.damaged_reports() << ", RSS " << std::fixed << std::setprecision(1) << m.rss_mib
     << " MiB (heap " << m.heap_mib << ", tensors " << m.alloc_mib << ", cached blocks "
     << m.cached_mib << "), loaded kernels " << m.loaded_kernels << ", max diff f32 "
     << sci(max_f32(c)) << " f64 " << sci(max_f64(c));
  return os.str();
}

void add_shared_stats(const TraceStats& s, Counters& c) {
  c.misses += s.misses;
  c.background_compiles += s.background_compiles;
  c.calls_while_compiling += s.calls_while_compiling;
  c.kernels += s.kernels;
  c.kernels_from_disk += s.kernels_from_disk;
  c.kernels_reused += s.kernels_reused;
  c.kernels_templated += s.kernels_templated;
  c.kernels_llvm += s.kernels_compiled;
}

int soak(const Options& o) {
  const double duration = o.duration_s();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln-soak-" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  set_cache_dir(dir);
  const Tolerances tol;
  std::cout << "kiln-soak: " << duration / 60 << " min, seed " << o.seed << ", " << o.threads
            << " worker threads on " << std::thread::hardware_concurrency()
            << " cores; kernel cache " << dir << " (background compiles "
            << (settings().background_compile ? "on" : "off") << ", dynamic sizes "
            << (settings().auto_dynamic ? "on" : "off") << ")" << std::endl;

  // The damager starts first, so that it inherits the real stderr, not the tap.
  DamagerProcess damager(dir, o.seed * 7919 + 1);
  StderrTap tap;
  Counters c;
  SharedFn shared = make_shared_fn();
  std::vector<std::thread> workers;
  for (int i = 0; i < o.threads; ++i) {
    WorkerOptions w;
    w.id = i;
    w.seed = o.seed;
    w.steps_per_round = o.steps_per_round;
    w.tol = tol;
    workers.emplace_back([w, &shared, &c] { run_worker(w, shared, c); });
  }

  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const double sample_every = std::min(1.0, std::max(0.1, duration / 100));
  std::vector<MemorySample> samples;
  double next_report = o.report_s;
  while (!c.stop.load()) {
    const double t = elapsed();
    samples.push_back(sample_memory(t));
    if (t >= next_report) {
      std::cout << status_line(t, c, tap, samples.back()) << std::endl;
      next_report += o.report_s;
    }
    if (!damager.running()) c.fail("the damager process ended during the run");
    if (t >= duration) break;
    std::this_thread::sleep_for(
        std::chrono::duration<double>(std::min(sample_every, duration - t)));
  }
  c.stop = true;
  for (std::thread& w : workers) w.join();
  wait_for_background_compiles();
  const double ran = elapsed();
  samples.push_back(sample_memory(ran));
  const TraceStats& shared_stats = shared.stats();  // every thread is done with it
  add_shared_stats(shared_stats, c);
  std::string damager_error;
  const std::string damage = damager.stop(&damager_error);
  tap.restore();

  const Flatness mem = judge_memory(samples, duration / 5, o.memory_limit_mib, 90);
  std::vector<std::string> failures;
  if (c.failed()) failures.push_back(c.failure());
  if (!damager_error.empty()) failures.push_back(damager_error);
  if (!mem.flat) failures.push_back("memory grew after the warm-up");
  if (duration >= 120 && tap.damaged_reports() == 0)
    failures.push_back("Kiln never read a damaged cache entry: the damage went untested");
  if (duration >= 120 && c.kernels_from_disk == 0)
    failures.push_back("no kernel came from the disk cache: the cache went untested");

  std::ostringstream os;
  os << "\nkiln-soak summary: " << clock_text(ran) << " (min:s), seed " << o.seed << ", "
     << o.threads << " threads on " << std::thread::hardware_concurrency() << " cores\n"
     << "  steps: eager " << c.steps_eager << ", traced " << c.steps_traced << "; rounds "
     << c.rounds << " (MLP and conv net, f32 and f64, Adam, dropout); shared function calls "
     << c.shared_calls << "\n  traced vs eager, largest relative difference (tolerance):\n"
     << "    f32: loss " << sci(c.loss_f32.get()) << " (" << sci(tol.loss_rtol_f32)
     << "), shared function " << sci(c.shared_f32.get()) << " (" << sci(tol.shared_rtol_f32)
     << ")\n"
     << "    f64: loss " << sci(c.loss_f64.get()) << " (" << sci(tol.loss_rtol_f64)
     << "), parameters, gradients and Adam state " << sci(c.state_f64.get()) << " ("
     << sci(tol.state_rtol_f64) << ", checked " << c.checks
     << " times, every 10 steps), shared function " << sci(c.shared_f64.get()) << " ("
     << sci(tol.shared_rtol_f64) << ")\n"
     << "  compiles (" << c.rounds - c.rounds_unwaited << " rounds counted, " << c.rounds_unwaited
     << " destroyed their step without waiting, and the shared function): " << c.misses
     << " signatures (" << c.misses - c.background_compiles << " foreground, "
     << c.background_compiles << " background, " << c.calls_while_compiling
     << " calls ran eagerly meanwhile); kernels " << c.kernels << ": compiled by LLVM "
     << c.kernels_llvm << ", from the disk cache " << c.kernels_from_disk << ", shared "
     << c.kernels_reused << ", templated " << c.kernels_templated << "\n"
     << "  the shared function (cache of 4 signatures): " << shared_stats.calls << " calls, "
     << shared_stats.misses << " signatures traced, " << shared_stats.evictions
     << " evicted; its stats keep the last " << shared_stats.miss_reasons.size()
     << " miss reasons and " << shared_stats.kernel_compile_ms.size() << " kernel records\n"
     << "  disk cache: damager " << (damage.empty() ? "(no report)" : damage) << "\n"
     << "    damaged entries Kiln reported (once per entry) " << tap.damaged_reports()
     << ", unwritable entries reported " << tap.write_failures() << "\n"
     << "  memory: " << mem.str() << "\n";
  for (const std::string& f : failures) os << "  FAIL: " << f << "\n";
  os << (failures.empty() ? "PASS" : "FAIL") << "\n";
  std::cout << os.str() << std::flush;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace kiln::soak

int main(int argc, char** argv) {
  kiln::soak::Options o;
  CLI::App app{
      "kiln-soak: traced and eager training side by side, for a long time, while another "
      "process damages the kernel cache"};
  app.add_option("--minutes", o.minutes, "how long to run (default 20)");
  app.add_option("--seconds", o.seconds, "how long to run, in seconds (instead of --minutes)");
  app.add_option("--seed", o.seed, "seed of data, models, batch sizes and damage (default 1)");
  app.add_option("--threads", o.threads, "worker threads (default 2)")->check(CLI::Range(1, 64));
  app.add_option("--report", o.report_s, "seconds between status lines (default 60)")
      ->check(CLI::PositiveNumber);
  app.add_option("--memory-limit", o.memory_limit_mib,
                 "MiB that memory may grow after the warm-up (default 8)");
  app.add_option("--steps-per-round", o.steps_per_round, "training steps per model (default 200)")
      ->check(CLI::Range(int64_t(10), int64_t(1) << 40));
  app.add_option("--damager", o.damager_dir,
                 "internal: run as the damaging process on this directory")
      ->group("");
  app.add_option("--parent", o.parent, "internal: the soak's process id")->group("");
  CLI11_PARSE(app, argc, argv);
  if (!o.damager_dir.empty()) return kiln::soak::run_damager(o.damager_dir, o.seed, o.parent);
  if (o.duration_s() < 0) {
    std::cerr << "kiln-soak: the duration must not be negative\n";
    return 2;
  }
  try {
    return kiln::soak::soak(o);
  } catch (const std::exception& e) {
    std::cerr << "kiln-soak: " << e.what() << "\nFAIL\n";
    return 1;
  }
}
