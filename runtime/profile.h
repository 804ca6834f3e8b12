// Profiling plan runs. While profiling is on (KILN_LOG=profile from the start,
// or Traced::profile for one call), the executors time every plan step:
//   - totals per step name, printed at exit by KILN_LOG=profile
//     (plan_profile_report);
//   - a trace: one event per step run (a kernel, a BLAS call, a sort, a check,
//     a collective's start or wait) with its bytes, flops and source lines and the
//     thread it ran on, one event per part of a kernel run on a pool thread,
//     and the traced calls and compiles around them; written as Chrome
//     trace-event JSON, the format chrome://tracing and https://ui.perfetto.dev open.
// The trace holds at most kMaxTraceEvents events; later ones are counted, not kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// Milliseconds of the steady clock since `t0`.
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// What a plan step costs as the compiler counted it (codegen fills it from the
/// kernel's description): what the trace shows beside its time.
struct StepCost {
  std::string kind;  // the group's kind: "elementwise", "reduction", "matmul", ...
  int64_t bytes_read = 0, bytes_written = 0, flops = 0;
  std::string source;  // the user's lines it computes ("mlp.cpp:12 mlp.cpp:14")
};

void set_plan_profiling(bool on);
bool plan_profiling();
/// Total milliseconds and calls per step name, largest first.
std::string plan_profile_report();
void reset_plan_profile();

/// One span of the trace.
struct TraceEvent {
  std::string name;
  /// "step" (a plan step), "chunk" (a part of a kernel's outer loop run by one
  /// thread), "copies" (a run's outputs and parameter updates copied where they
  /// go), "call" (a run of a traced function's plan), "compile", "trace".
  const char* cat = "step";
  double start_us = 0, dur_us = 0;  // microseconds since the trace's clock started
  uint32_t thread = 0;              // trace_thread()'s number of the thread that ran it
  const char* what = "";            // steps: "kernel", "blas", "sort", "check", "collective"
  int64_t step = -1;                // steps: the index in its plan
  int64_t begin = 0, end = 0;       // chunks: the outer-loop range; kernel steps: [0, range)
  int64_t parts = 0;                // kernel steps: parts its outer loop was split into
  std::shared_ptr<const StepCost> cost;
};

inline constexpr size_t kMaxTraceEvents = size_t{1} << 19;

/// Microseconds on the trace's clock.
double trace_now_us();
/// This thread's number in the trace (0, 1, ... in the order threads first record).
uint32_t trace_thread();
/// Adds an event (profiling on or not: callers check plan_profiling()).
void record_trace_event(TraceEvent e);
/// Times a call, a compile or a trace from construction to destruction, when
/// profiling is on at construction.
class TraceSpan {
 public:
  TraceSpan(const char* cat, std::string name);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  bool on_;
  const char* cat_;
  std::string name_;
  double start_ = 0;
};

/// Events recorded so far: a mark for trace_events and truncate_trace.
size_t trace_size();
/// The events recorded since `mark`, in order of recording.
std::vector<TraceEvent> trace_events(size_t mark = 0);
/// Forgets the events recorded since `mark`.
void truncate_trace(size_t mark);
/// Runs `run` with profiling on and returns the events recorded meanwhile.
/// Profiling is restored as it was, also when `run` throws; when it was off,
/// those events leave the trace (when on, KILN_LOG=profile keeps them for its
/// file at exit).
std::vector<TraceEvent> profiled(const std::function<void()>& run);
/// Events not kept because the trace was full.
size_t trace_dropped();

/// Writes `events` as Chrome trace-event JSON (atomically, runtime/binary_io.h):
/// complete ("X") events with their costs under "args", and a name for each
/// thread. Throws kiln::Error when the file cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events);

/// Steps among `events` (those of category "step").
size_t count_steps(const std::vector<TraceEvent>& events);

}  // namespace kiln
