// The background compile queue (compile_queue.h).
#include "codegen/compile_queue.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "codegen/backend.h"
#include "runtime/collective.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

// Made on first use, after the first plan compiled. At exit the process's main
// thread drains it (DrainAtExit) before any static is destroyed; its destructor
// (an exit from another thread) finishes the task it is in and drops the rest.
class BackgroundCompiler {
 public:
  static BackgroundCompiler& get() {
    static BackgroundCompiler compiler;
    made_.store(true);
    return compiler;
  }
  static bool made() { return made_.load(); }

  // A forked child drops what it posts and does not wait: the thread stayed in
  // the parent (its tiered kernels keep their quick code, new sizes run eagerly).
  void post(std::function<void()> task, CompileUrgency urgency) {
    if (forked()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (exiting_) return;  // the process is ending: nothing would run the result
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { loop(); });
      owner_.store(::getpid());
    }
    (urgency == CompileUrgency::Needed ? needed_ : improvements_).push_back(std::move(task));
    work_.notify_one();
  }

  // Improvements do not wait for eager calls while someone waits for the queue
  // (the waiter may itself be inside an eager call: it would wait for itself).
  void wait_idle() {
    if (forked()) return;
    std::unique_lock<std::mutex> lock(mu_);
    ++waiters_;
    work_.notify_one();
    idle_.wait(lock, [&] { return idle(); });
    --waiters_;
  }

  // Runs the queued tasks to the end (their kernels reach the disk cache, so the
  // next process starts warm) and takes no more.
  void finish_at_exit() {
    if (forked()) return;  // the thread, and what it ran, stayed in the parent
    std::unique_lock<std::mutex> lock(mu_);
    exiting_ = true;
    work_.notify_one();  // improvements waiting for an eager call go on
    idle_.wait(lock, [&] { return idle(); });
  }

  void eager_call(int delta) {
    std::lock_guard<std::mutex> lock(mu_);
    eager_calls_ += delta;
    if (eager_calls_ == 0) {
      last_eager_end_ = Clock::now();
      work_.notify_one();
    }
  }

  ~BackgroundCompiler() {
    if (forked()) {
      thread_.detach();  // no such thread here: only its handle (and maybe mu_ held) was copied
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      needed_.clear();
      improvements_.clear();
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
      work_.wait(lock, [&] {
        return stop_ || !needed_.empty() ||
               (!improvements_.empty() && (eager_calls_ == 0 || exiting_ || waiters_ > 0));
      });
      if (stop_) return;
      // Calls that run eagerly back to back leave gaps of microseconds: an
      // improvement started in one would take the core from the next call.
      if (needed_.empty() && !exiting_ && waiters_ == 0 &&
          Clock::now() < last_eager_end_ + kEagerQuiet) {
        work_.wait_until(lock, last_eager_end_ + kEagerQuiet);
        continue;
      }
      std::deque<std::function<void()>>& from = needed_.empty() ? improvements_ : needed_;
      std::function<void()> task = std::move(from.front());
      from.pop_front();
      busy_ = true;
      lock.unlock();
      task();  // keeps its own error
      lock.lock();
      busy_ = false;
      idle_.notify_all();
    }
  }

  bool idle() const { return needed_.empty() && improvements_.empty() && !busy_; }

  // A child forked after the thread started has the queue's state but not the thread.
  bool forked() const {
    const pid_t owner = owner_.load();
    return owner != 0 && owner != ::getpid();
  }

  std::mutex mu_;
  std::condition_variable work_, idle_;
  std::deque<std::function<void()>> needed_, improvements_;
  bool busy_ = false, stop_ = false, exiting_ = false;
  using Clock = std::chrono::steady_clock;
  // How long after the last eager call ends improvements wait for the next one.
  static constexpr std::chrono::milliseconds kEagerQuiet{2};
  int eager_calls_ = 0;  // EagerCallScopes held
  int waiters_ = 0;      // threads in wait_idle
  Clock::time_point last_eager_end_{};
  std::thread thread_;
  std::atomic<pid_t> owner_{0};  // the process that started thread_
  static inline std::atomic<bool> made_{false};

 public:
  static inline thread_local bool on_thread_ = false;
};

// A compile needs LLVM's function-local statics, and the compile thread makes
// some of them after the queue itself (the first optimised compile of a tiered
// process runs there), so they are destroyed before it. glibc's exit() runs the
// exiting thread's thread_local destructors before its atexit list and the static
// destructors: one armed on the main thread drains the queue while every static
// is alive. The main thread's thread_locals end only with the process (or with
// pthread_exit of main, after which the queue takes no new tasks: tiered kernels
// keep their quick code and new sizes keep running eagerly, the same values).
struct DrainAtExit {
  ~DrainAtExit() {
    if (BackgroundCompiler::made()) BackgroundCompiler::get().finish_at_exit();
  }
};

void arm_drain_at_exit() {
  if (::gettid() != ::getpid()) return;  // only the main thread's end is the process's
  thread_local DrainAtExit drain;
  (void)drain;
}

}  // namespace

void post_background_compile(std::function<void()> task, CompileUrgency urgency) {
  arm_drain_at_exit();
  BackgroundCompiler::get().post(std::move(task), urgency);
}

EagerCallScope::EagerCallScope() {
  BackgroundCompiler::get().eager_call(+1);
}

EagerCallScope::~EagerCallScope() {
  BackgroundCompiler::get().eager_call(-1);
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
