// Compiling a traced program (program.h).
#include "codegen/program.h"

#include <chrono>
#include <sstream>
#include <utility>

#include "codegen/compile_queue.h"
#include "runtime/profile.h"

namespace kiln {

std::shared_ptr<Plan> LazyPlan::get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (plan_) return plan_;
  const auto t0 = std::chrono::steady_clock::now();
  CompileReport report;
  plan_ = compile_graph(graph_, opts_, &report);
  if (listener_) listener_(report, plan_->steps.size(), ms_since(t0));
  return plan_;
}

void BackgroundCompile::post(std::weak_ptr<const void> owner,
                             std::function<std::string()> compile) {
  ready_.store(false);
  post_background_compile([this, owner = std::move(owner), compile = std::move(compile)] {
    const std::shared_ptr<const void> alive = owner.lock();
    if (!alive) return;
    try {
      log_ = compile();
    } catch (...) {
      error_ = std::current_exception();
    }
    ready_.store(true, std::memory_order_release);
  });
}

std::string BackgroundCompile::finish() {
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return std::exchange(log_, std::string());
}

std::string CompiledProgram::summary() const {
  std::ostringstream os;
  os << "compiled " << plan->steps.size() << " steps in " << compile_ms << " ms ("
     << report->kernels_reused << " kernels reused, " << report->kernels_from_disk
     << " from the disk cache, " << report->kernels_quick
     << " quick, " << report->kernels_streaming << " with streaming stores; kernels: " << report->kernel_times.str() << ")";
  return os.str();
}

CompiledProgram compile_program(const Graph& forward, std::unique_ptr<Graph> backward,
                                std::span<const PassRecord> partition_log,
                                const CompileOptions& opts, const CompileListener& listener,
                                const std::string& name) {
  const auto t0 = std::chrono::steady_clock::now();
  CompiledProgram p;
  p.report = std::make_unique<CompileReport>();
  {
    TraceSpan span("compile", "compile " + name);
    p.plan = compile_graph(forward, opts, p.report.get());
  }
  p.report->passes.insert(p.report->passes.begin(), partition_log.begin(), partition_log.end());
  p.compile_ms = ms_since(t0);
  if (listener) listener(*p.report, p.plan->steps.size(), p.compile_ms);
  if (backward) p.backward = std::make_shared<LazyPlan>(std::move(*backward), opts, listener);
  return p;
}

void record_program_kernels(const Graph& forward, const Graph* backward, CompileOptions opts) {
  opts.record_kernels_only = true;
  CompileReport report;
  (void)compile_graph(forward, opts, &report);
  if (backward) (void)compile_graph(*backward, opts);
}

}  // namespace kiln
