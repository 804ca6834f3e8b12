// The soak's training workloads (tools/soak): small nets trained with Adam
// eagerly and traced side by side, on the same data, seeds and dropout draws,
// with batch sizes that change every epoch; and one traced function shared by
// every worker thread. Each worker checks that traced equals eager as it goes.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include <kiln/kiln.h>

namespace kiln::soak {

/// The largest value seen, updated from several threads.
class MaxValue {
 public:
  void update(double v) {
    double cur = v_.load();
    while (v > cur && !v_.compare_exchange_weak(cur, v)) {
    }
  }
  double get() const { return v_.load(); }

 private:
  std::atomic<double> v_{0};
};

/// What the workers have done and seen, shared with the status lines and the summary.
struct Counters {
  std::atomic<int64_t> steps_eager{0}, steps_traced{0}, shared_calls{0}, rounds{0}, checks{0};
  // From the traced functions' stats (rounds whose background compiles were waited for).
  std::atomic<int64_t> misses{0}, background_compiles{0}, calls_while_compiling{0};
  std::atomic<int64_t> kernels{0}, kernels_llvm{0}, kernels_from_disk{0}, kernels_reused{0},
      kernels_templated{0};
  // Rounds that destroyed their traced step right away, background compile or not.
  std::atomic<int64_t> rounds_unwaited{0};
  // The largest traced-vs-eager differences, relative: |traced - eager| / max(|eager|, floor).
  MaxValue loss_f32, loss_f64, state_f64, shared_f32, shared_f64;

  std::atomic<bool> stop{false};
  /// Records the first failure and stops every worker.
  void fail(const std::string& what);
  bool failed() const { return failed_.load(); }
  std::string failure() const;

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  std::string failure_;
};

/// The traced function every worker calls (each on its own inputs): a forward
/// with no captured state, so the threads share it freely.
using SharedFn = Traced<Tensor(Tensor, Tensor, Tensor)>;
SharedFn make_shared_fn();

/// Tolerances of the traced-vs-eager checks (see tools/soak/soak.cpp's header).
struct Tolerances {
  double loss_rtol_f32 = 1e-4, loss_atol_f32 = 1e-5;
  double loss_rtol_f64 = 1e-9, loss_atol_f64 = 1e-12;
  double state_rtol_f64 = 1e-9, state_atol_f64 = 1e-12;
  double shared_rtol_f32 = 1e-5, shared_atol_f32 = 1e-5;
  double shared_rtol_f64 = 1e-12, shared_atol_f64 = 1e-12;
};

struct WorkerOptions {
  int id = 0;
  uint64_t seed = 1;
  int64_t steps_per_round = 200;
  int64_t check_every = 10;  // steps between full-state checks and resets
  Tolerances tol;
};

/// Runs training rounds until counters.stop; every failure (a mismatch, an
/// exception) goes to counters.fail.
void run_worker(const WorkerOptions& o, SharedFn& shared, Counters& counters);

}  // namespace kiln::soak
