// A traced program compiled: the forward plan with its compile report and, for
// a call eager code will differentiate, the backward plan, compiled when a
// backward first needs it. What the frontend's traced functions run
// (frontend/jit.cpp), built from the partition's graphs (passes/partition.h).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "codegen/compile.h"

namespace kiln {

/// Told of every plan a program compiles (the forward, a lazily compiled
/// backward): its report, its number of steps and the milliseconds it took.
using CompileListener = std::function<void(const CompileReport& report, size_t steps, double ms)>;

/// A plan compiled on its first run: the backward of an autograd call, which a
/// training step that runs backward() itself and returns its loss never runs.
/// Thread-safe; a compile that fails is tried again on the next run.
class LazyPlan {
 public:
  LazyPlan(Graph graph, CompileOptions opts, CompileListener listener)
      : graph_(std::move(graph)), opts_(std::move(opts)), listener_(std::move(listener)) {}
  const Graph& graph() const { return graph_; }
  std::shared_ptr<Plan> get();

 private:
  Graph graph_;
  CompileOptions opts_;
  CompileListener listener_;
  std::mutex mu_;
  std::shared_ptr<Plan> plan_;
};

struct CompiledProgram {
  std::shared_ptr<Plan> plan;             // the forward
  std::unique_ptr<CompileReport> report;  // the forward's, headed by the partition's record
  std::shared_ptr<LazyPlan> backward;     // null when the program has no backward
  double compile_ms = 0;                  // the forward's
  /// "compiled 12 steps in 40 ms (3 kernels reused, 0 from the disk cache; kernels: ...)".
  std::string summary() const;
};

/// Compiles `forward` (under a "compile <name>" profile span), its report's
/// passes headed by `partition_log` (the partition that made the graph, run
/// when it was traced), and tells `listener`. `backward`, when given, becomes
/// the lazily compiled backward, with the same options and listener.
CompiledProgram compile_program(const Graph& forward, std::unique_ptr<Graph> backward,
                                std::span<const PassRecord> partition_log,
                                const CompileOptions& opts, const CompileListener& listener,
                                const std::string& name);

/// A compile run on the background thread (compile_queue.h) while its caller
/// goes on without it: ready() once it has run. Its error, or the log line it
/// returned, goes to the first caller that finishes it.
class BackgroundCompile {
 public:
  /// Posts `compile`, which returns its log line. It runs only if `owner` (the
  /// object this belongs to) is still alive when its turn comes.
  void post(std::weak_ptr<const void> owner, std::function<std::string()> compile);
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  /// Once ready: rethrows the compile's error, else returns its log line; once
  /// (afterwards "").
  std::string finish();

 private:
  std::atomic<bool> ready_{true};
  std::exception_ptr error_;
  std::string log_;
};

/// A dynamic dimension's probe at another size: lowers the kernels of `forward`
/// and of `backward` (when given) and remembers them for later templates
/// (CompileOptions::record_kernels_only); compiles nothing.
void record_program_kernels(const Graph& forward, const Graph* backward, CompileOptions opts);

}  // namespace kiln
