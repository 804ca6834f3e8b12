// The communication thread and the world-of-one communicator (collective.h).
#include "runtime/collective.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "ir/error.h"
#include "runtime/cuda_driver.h"

namespace kiln {

void Communicator::run_device(const CollectiveCall& c, const void*, void*, const cuda::Event&,
                              cuda::Event&, double) {
  throw Error("internal: " + c.what + ": the " + backend() +
              " communicator has no collectives over CUDA buffers");
}

int64_t collective_recv_count(const CollectiveCall& c, int world) {
  switch (c.op) {
    case OpKind::all_gather:
      return c.count * world;
    case OpKind::reduce_scatter:
      return c.count / world;
    default:
      return c.count;
  }
}

namespace {

class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  void run(const CollectiveCall& c, const void* send, void* recv, double) override {
    if (send != recv) std::memcpy(recv, send, static_cast<size_t>(c.count) * dtype_size(c.dtype));
  }
  void barrier(double) override {}
};

}  // namespace

std::unique_ptr<Communicator> make_self_communicator() {
  return std::make_unique<SelfCommunicator>();
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

struct collectives::Pending {
  CollectiveCall call;
  std::vector<char> send, recv;  // owned buffers (start_call); recv is unused in place
  const void* in = nullptr;      // what the communicator reads and writes: the owned
  void* out = nullptr;           // buffers, or the caller's (run, start_device_call)
  std::shared_ptr<cuda::Event> ready, finished;  // a call over device buffers (start_device_call)
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
};

namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The communication thread: runs queued tasks in order, each with the communicator.
class Engine {
 public:
  void start(std::function<std::unique_ptr<Communicator>()> make, double timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    if (running_)
      throw Error("distributed: already initialised (" + backend_ + ", rank " +
                  std::to_string(rank_) + " of " + std::to_string(size_) + ")");
    timeout_s_ = timeout_s;
    broken_.clear();
    stopping_ = false;
    ready_ = false;
    init_error_ = nullptr;
    thread_ = std::thread([this, make = std::move(make)] { loop(make); });
    cv_.wait(lock, [&] { return ready_; });
    if (init_error_) {
      lock.unlock();
      thread_.join();
      std::rethrow_exception(init_error_);
    }
    running_ = true;
  }

  // `exit_status`: the process's when it is exiting (a call in flight then
  // stops waiting), or -1 (finalize()).
  void stop(int exit_status, bool at_exit) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!running_) return;
      stopping_ = true;
      running_ = false;
      exit_status_ = exit_status;
      if (at_exit && comm_) comm_->interrupt();
    }
    cv_.notify_all();
    thread_.join();
  }

  bool running() {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }

  // Queues `task` (run on the thread with the communicator).
  void post(std::function<void(Communicator&)> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!running_)
        throw Error(
            "distributed: not initialised (call kiln::distributed::init() before any "
            "collective or DistributedDataParallel)");
      queue_.push_back(std::move(task));
    }
    cv_.notify_all();
  }

  int rank() { return checked().rank_; }
  int size() { return checked().size_; }
  std::string backend() { return checked().backend_; }
  int device() { return checked().device_; }
  double timeout_s() {
    std::lock_guard<std::mutex> lock(mu_);
    return timeout_s_;
  }
  void set_timeout_s(double s) {
    KILN_CHECK(s > 0, "distributed: expected a timeout > 0 seconds, got ", s);
    std::lock_guard<std::mutex> lock(mu_);
    timeout_s_ = s;
  }
  collectives::Stats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  // Runs one call on the thread (called there): checks for an earlier failure first.
  void execute(Communicator& comm, collectives::Pending& p) {
    std::string broken;
    double timeout;
    {
      std::lock_guard<std::mutex> lock(mu_);
      broken = broken_;
      timeout = timeout_s_;
    }
    if (!broken.empty())
      throw Error("distributed: " + p.call.what + " not run: the communicator failed earlier: " +
                  broken);
    auto t0 = std::chrono::steady_clock::now();
    try {
      if (p.finished) {
        comm.run_device(p.call, p.in, p.out, *p.ready, *p.finished, timeout);
      } else {
        comm.run(p.call, p.in, p.out, timeout);
      }
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mu_);
      broken_ = e.what();
      throw;
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.calls++;
    stats_.bytes += p.call.count * static_cast<int64_t>(dtype_size(p.call.dtype));
    stats_.busy_ms += ms_between(t0, std::chrono::steady_clock::now());
  }

  void mark_broken(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = why;
  }

 private:
  Engine& checked() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_)
      throw Error("distributed: not initialised (call kiln::distributed::init() first)");
    return *this;
  }

  void loop(const std::function<std::unique_ptr<Communicator>()>& make) {
    std::unique_ptr<Communicator> comm;
    try {
      comm = make();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      init_error_ = std::current_exception();
      ready_ = true;
      cv_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      rank_ = comm->rank();
      size_ = comm->size();
      backend_ = comm->backend();
      device_ = comm->device();
      comm_ = comm.get();
      ready_ = true;
    }
    cv_.notify_all();
    for (;;) {
      std::function<void(Communicator&)> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) break;  // stopping, and every queued call ran
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task(*comm);
    }
    int status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      status = exit_status_;
      comm_ = nullptr;
    }
    try {
      comm->leave(status);  // the other ranks learn that this one left
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kiln distributed: leaving: %s\n", e.what());
    }
    comm.reset();  // MPI_Finalize, on the thread that initialised it
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  std::deque<std::function<void(Communicator&)>> queue_;
  bool running_ = false, stopping_ = false, ready_ = false;
  std::exception_ptr init_error_;
  Communicator* comm_ = nullptr;  // owned by the thread, while it runs
  int exit_status_ = -1;
  int rank_ = 0, size_ = 1, device_ = -1;
  std::string backend_;
  double timeout_s_ = 300;
  std::string broken_;
  collectives::Stats stats_;
};

Engine& engine() {
  static Engine* e = new Engine();  // lives until exit; stop() runs from on_exit
  return *e;
}

// At exit, with the process's exit status (glibc's on_exit gives it).
void stop_at_exit(int status, void*) {
  engine().stop(status, /*at_exit=*/true);
}

thread_local SourceLoc t_site;

}  // namespace

namespace collectives {

SiteScope::SiteScope(SourceLoc loc) : prev_(t_site) {
  t_site = loc;
}
SiteScope::~SiteScope() {
  t_site = prev_;
}
SourceLoc current_site() {
  return t_site;
}

void start(std::function<std::unique_ptr<Communicator>()> make, double timeout_s) {
  KILN_CHECK(timeout_s > 0, "distributed: expected a timeout > 0 seconds, got ", timeout_s);
  static std::once_flag registered;
  std::call_once(registered, [] {
#ifdef __GLIBC__
    on_exit(stop_at_exit, nullptr);
#else
    std::atexit([] { stop_at_exit(0, nullptr); });  // the status is unknown: as a normal end
#endif
  });
  engine().start(std::move(make), timeout_s);
}

bool started() {
  return engine().running();
}
void stop() {
  engine().stop(-1, /*at_exit=*/false);
}
int rank() {
  return engine().rank();
}
int world_size() {
  return engine().size();
}
std::string backend() {
  return engine().backend();
}
int device() {
  return engine().device();
}
double timeout_s() {
  return engine().timeout_s();
}
void set_timeout_s(double s) {
  engine().set_timeout_s(s);
}
Stats stats() {
  return engine().stats();
}

namespace {

// Queues `work` on the communication thread; `p` is done when it returns or throws.
void post(const Ticket& p, std::function<void(Communicator&)> work) {
  engine().post([p, work = std::move(work)](Communicator& comm) {
    std::exception_ptr err;
    try {
      work(comm);
    } catch (...) {
      err = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(p->mu);
      p->error = err;
      p->done = true;
    }
    p->cv.notify_all();
  });
}

void wait_done(const Ticket& t) {
  std::unique_lock<std::mutex> lock(t->mu);
  t->cv.wait(lock, [&] { return t->done; });
  if (t->error) std::rethrow_exception(t->error);
}

bool in_place(OpKind k) {
  return k == OpKind::all_reduce || k == OpKind::broadcast;
}

Ticket submit(std::shared_ptr<Pending> p) {
  const int world = world_size();
  if (p->call.op == OpKind::reduce_scatter)
    KILN_CHECK(p->call.count % world == 0, "distributed: ", p->call.what,
               ": expected a number of elements divisible by the world size ", world, ", got ",
               p->call.count);
  if (!p->call.loc.known()) p->call.loc = t_site;  // an eager call: the user's line
  post(p, [p](Communicator& comm) { engine().execute(comm, *p); });
  return p;
}

}  // namespace

Ticket start_call(CollectiveCall c, std::vector<char> send) {
  const size_t esize = dtype_size(c.dtype);
  KILN_CHECK(send.size() == static_cast<size_t>(c.count) * esize,
             "internal: ", c.what, ": send buffer of ", send.size(), " bytes for ", c.count,
             " elements");
  auto p = std::make_shared<Pending>();
  p->send = std::move(send);
  p->in = p->send.data();
  if (in_place(c.op)) {
    p->out = p->send.data();
  } else {
    p->recv.resize(static_cast<size_t>(collective_recv_count(c, world_size())) * esize);
    p->out = p->recv.data();
  }
  p->call = std::move(c);
  return submit(std::move(p));
}

const std::vector<char>& wait(const Ticket& t) {
  wait_done(t);
  return in_place(t->call.op) ? t->send : t->recv;
}

void run(const CollectiveCall& c, const void* send, void* recv) {
  auto p = std::make_shared<Pending>();
  p->call = c;
  p->in = send;
  p->out = recv;
  wait_done(submit(std::move(p)));
}

Ticket start_device_call(CollectiveCall c, const void* send, void* recv,
                         std::shared_ptr<cuda::Event> ready) {
  KILN_CHECK(engine().device() >= 0, "internal: ", c.what,
             ": a call over device buffers, but the communicator has no device");
  auto p = std::make_shared<Pending>();
  p->call = std::move(c);
  p->in = send;
  p->out = recv;
  p->ready = std::move(ready);
  p->finished = std::make_shared<cuda::Event>(engine().device(), /*timing=*/false);
  return submit(std::move(p));
}

void wait_device(const Ticket& t) {
  wait_done(t);
  t->finished->wait_on(cuda::stream(engine().device()));
}

void barrier() {
  auto p = std::make_shared<Pending>();
  p->call.what = "barrier";
  post(p, [](Communicator& comm) {
    try {
      comm.barrier(engine().timeout_s());
    } catch (const Error& e) {
      engine().mark_broken(e.what());
      throw;
    }
  });
  wait_done(p);
}

}  // namespace collectives
}  // namespace kiln
