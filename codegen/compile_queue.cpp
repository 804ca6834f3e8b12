// The background compile queue (compile_queue.h).
#include "codegen/compile_queue.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "codegen/backend.h"
#include "runtime/collective.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

// Made on first use, after the first plan compiled: at exit it is destroyed
// before what compiles, finishing the task it is in and dropping the rest.
class BackgroundCompiler {
 public:
  static BackgroundCompiler& get() {
    static BackgroundCompiler compiler;
    made_.store(true);
    return compiler;
  }
  static bool made() { return made_.load(); }

  void post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    tasks_.push_back(std::move(task));
    work_.notify_one();
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return tasks_.empty() && !busy_; });
  }

  ~BackgroundCompiler() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      tasks_.clear();
      work_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    SerialScope serial;
    on_thread_ = true;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (stop_) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      busy_ = true;
      lock.unlock();
      task();  // keeps its own error
      lock.lock();
      busy_ = false;
      idle_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_, idle_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
  static inline std::atomic<bool> made_{false};

 public:
  static inline thread_local bool on_thread_ = false;
};

}  // namespace

void post_background_compile(std::function<void()> task) {
  BackgroundCompiler::get().post(std::move(task));
}

bool on_background_compile_thread() {
  return BackgroundCompiler::on_thread_;
}

bool compiles_in_background(const Graph& g, std::span<const TensorType> types) {
  if (collectives::started() && collectives::world_size() > 1 &&
      std::any_of(g.nodes().begin(), g.nodes().end(),
                  [](const Node& n) { return op_info(n.op).category == OpCategory::Collective; }))
    return false;
  return std::all_of(types.begin(), types.end(), [](const TensorType& t) {
    const Backend& b = backend_for(t.device);
    return b.sizes_at_run_time() && b.compiles_off_thread();
  });
}

void drain_background_compiles() {
  if (BackgroundCompiler::made()) BackgroundCompiler::get().wait_idle();
}

}  // namespace kiln
