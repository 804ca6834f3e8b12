// Collectives: the communication of data-parallel training (DESIGN.md,
// "Collectives are plan steps"). A Communicator moves dense buffers between the
// ranks of one job: MPI on CPUs (mpi_comm.cpp, when Kiln was built with MPI),
// or a world of one process ("self"); NCCL (nccl_comm.cpp) adds collectives
// over CUDA device buffers to one of those. Every call goes through one
// communication thread, which owns the communicator (MPI is initialised on it),
// so a compiled plan can start a collective and go on computing while it runs
// (start/wait), and eager calls simply start and wait.
//
// Failure: before any data moves, every rank tells every other what it is
// about to run (an Arrival, runtime/arrival.h: its sequence number, the
// collective, dtype, shapes, reduce op, root and the user's line), and ranks
// that disagree fail on every rank, naming both calls. A collective that does
// not complete within the timeout raises a kiln::Error on every rank that
// waits for it, naming the collective and the ranks that never arrived; a rank
// that leaves (exit(), or distributed::finalize()) tells the others, whose
// calls then fail at once, naming it. After any failure the communicator is
// broken and every later call fails at once with that first error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/op.h"

namespace kiln {

namespace cuda {
class Event;
}

/// One collective over dense buffers of `dtype`.
struct CollectiveCall {
  OpKind op = OpKind::all_reduce;  // all_reduce, broadcast, all_gather, reduce_scatter
  ReduceOp reduce = ReduceOp::sum;  // all_reduce, reduce_scatter
  int root = 0;                     // broadcast
  DType dtype = DType::f32;
  int64_t count = 0;  // elements this rank sends
  std::string what;   // for errors and logs: "all_reduce of f32[4] (sum)"
  /// The shape of each tensor it carries ("[4]", or a bucket's "[4,16], [4]"):
  /// every rank must give the same.
  std::string shapes;
  SourceLoc loc;  // the user's line (when unknown, collectives::current_site() of the caller)
};

/// Elements a rank receives for a call in a world of `world` ranks.
int64_t collective_recv_count(const CollectiveCall& c, int world);

/// A transport between the ranks of one job. Called only on the communication thread.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "self", "nccl"
  /// Runs `c` over host buffers (recv holds collective_recv_count elements;
  /// all_reduce and broadcast may be given recv == send, in place),
  /// returning when it completed; throws kiln::Error naming `c.what` and the
  /// ranks that did not arrive when it takes longer than `timeout_s`.
  virtual void run(const CollectiveCall& c, const void* send, void* recv, double timeout_s) = 0;
  virtual void barrier(double timeout_s) = 0;
  /// Waits until every rank has reached this point and agrees on `c` (see
  /// runtime/arrival.h), naming `c` and the ranks that never arrived on
  /// timeout, or both calls when they differ.
  virtual void arrive(const CollectiveCall& c, double timeout_s) { barrier(timeout_s); }
  /// Called once, on the communication thread, before the communicator is
  /// destroyed: tells the other ranks that this one leaves, so that their
  /// collectives fail at once naming it. `exit_status`: the process's, when it
  /// is exiting, or -1 (distributed::finalize()). A communicator that failed, or
  /// a process exiting with a nonzero status, leaves without waiting for the
  /// others (MPI is not finalised).
  virtual void leave(int exit_status) {}
  /// From any thread: makes a call in flight on the communication thread stop
  /// waiting and fail (the process is exiting).
  virtual void interrupt() { interrupted_.store(true); }
  /// The CUDA device whose buffers run_device takes (NCCL), or -1 when
  /// collectives on CUDA tensors stage through host memory.
  virtual int device() const { return -1; }
  /// Runs `c` over buffers on device(): queued on the device's collective
  /// stream after `ready` (recorded on the device's stream), then `done` is
  /// recorded there; returns when `done` has passed. Fails as run() does.
  virtual void run_device(const CollectiveCall& c, const void* send, void* recv,
                          const cuda::Event& ready, cuda::Event& done, double timeout_s);

 protected:
  bool interrupted() const { return interrupted_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> interrupted_{false};
};

/// A world of one process: every collective copies its input.
std::unique_ptr<Communicator> make_self_communicator();
/// MPI's world communicator, initialised by this call (MPI_Init_thread); throws
/// kiln::Error when Kiln was built without MPI.
std::unique_ptr<Communicator> make_mpi_communicator();
/// True when this process was started by an MPI launcher (mpirun sets its
/// environment), so init() should use MPI.
bool launched_by_mpi();
/// True when Kiln was built with MPI.
bool have_mpi();
/// NCCL over `host` (which runs the collectives on host buffers, and carries
/// NCCL's unique id from rank 0 to every rank): one CUDA device per rank, the
/// local rank's modulo the device count. Throws kiln::Error when CUDA or NCCL
/// is unavailable, or when more ranks run on this machine than it has devices.
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     double timeout_s);

namespace collectives {

/// Starts the communication thread with the communicator `make` returns (made on
/// that thread). Throws kiln::Error if already started.
void start(std::function<std::unique_ptr<Communicator>()> make, double timeout_s);
bool started();
/// Stops the thread (and finalises MPI, after telling the other ranks that this
/// one leaves); start() may be called again afterwards only with a "self"
/// communicator (MPI cannot be initialised twice). At exit the same happens by
/// itself, promptly: a call in flight stops waiting, and a process exiting with
/// a nonzero status does not wait for the other ranks in MPI_Finalize.
void stop();
int rank();
int world_size();
std::string backend();
/// The CUDA device whose collectives run on the device (NCCL), or -1.
int device();
double timeout_s();
void set_timeout_s(double s);
void barrier();

/// Names the user's line for the collectives this thread runs eagerly in its
/// scope (the frontend's collective ops; a plan's calls carry their own), so
/// that a mismatch across ranks names each rank's line.
class SiteScope {
 public:
  explicit SiteScope(SourceLoc loc);
  ~SiteScope();
  SiteScope(const SiteScope&) = delete;
  SiteScope& operator=(const SiteScope&) = delete;

 private:
  SourceLoc prev_;
};
/// The innermost SiteScope's line on this thread, or an unknown one.
SourceLoc current_site();

/// An in-flight collective: the packed send buffer, then the received data.
struct Pending;
using Ticket = std::shared_ptr<Pending>;

/// Queues `c` on the communication thread with `send` (moved in; its size is
/// c.count elements) and returns at once. all_reduce and broadcast run in place
/// on it.
Ticket start_call(CollectiveCall c, std::vector<char> send);
/// Waits for a started call and returns the received data (collective_recv_count
/// elements), or rethrows its error.
const std::vector<char>& wait(const Ticket& t);
/// Runs `c` over the caller's buffers (no copies; recv may equal send for
/// all_reduce and broadcast) and returns when it completed.
void run(const CollectiveCall& c, const void* send, void* recv);

/// Queues `c` over device buffers of device() (see Communicator::run_device):
/// nothing is copied; `send` and `recv` must stay untouched until the device's
/// stream has waited for the call (wait_device). Returns at once.
Ticket start_device_call(CollectiveCall c, const void* send, void* recv,
                         std::shared_ptr<cuda::Event> ready);
/// Waits for a call started with start_device_call (or rethrows its error), then
/// makes the device's stream wait for it, so later kernels read its result.
void wait_device(const Ticket& t);

/// Counters for benchmarks and tests.
struct Stats {
  int64_t calls = 0, bytes = 0;
  double busy_ms = 0;  // time the communication thread spent inside collectives
};
Stats stats();

}  // namespace collectives
}  // namespace kiln
