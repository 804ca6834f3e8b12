// The MPI communicator (collective.h): the one file that includes mpi.h,
// compiled with KILN_HAVE_MPI when CMake found MPI; without it,
// make_mpi_communicator says how to get it.
//
// Every call first exchanges an arrival record with every other rank (its
// sequence number, the collective, dtype, shapes, reduce op, root and the
// user's line: runtime/arrival.h), then runs the nonblocking MPI
// collective; both are polled against one deadline, so a rank that never
// arrives, or dies during the call, makes the others fail with the
// collective's name and the missing ranks instead of hanging. Ranks whose
// records disagree (different programs, or the same call with another shape)
// all fail before any data moves, naming both calls, rather than MPI aborting
// the job with MPI_ERR_TRUNCATE. A rank that leaves sends a departure record
// (its own tag), which the others look for while they wait, so a call that
// rank will never join fails at once.
#include "runtime/arrival.h"
#include "runtime/collective.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "ir/error.h"

#ifdef KILN_HAVE_MPI
// The C API only: no MPI C++ bindings (removed from the standard) to link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace kiln {

#ifndef KILN_HAVE_MPI

bool have_mpi() {
  return false;
}

std::unique_ptr<Communicator> make_mpi_communicator() {
  throw Error(
      "distributed: this Kiln was built without MPI (install libopenmpi-dev and openmpi-bin, "
      "then configure and build again); only a world of one process is available");
}

#else

bool have_mpi() {
  return true;
}

namespace {

constexpr int kArrivalTag = 7001;
constexpr int kDepartureTag = 7002;

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

MPI_Datatype mpi_type(DType t, const std::string& what) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::u8:
      return MPI_UINT8_T;
    case DType::i8:
      return MPI_INT8_T;
    case DType::i16:
      return MPI_INT16_T;
    case DType::b8:
      break;
  }
  throw Error("distributed: " + what + ": expected a numeric tensor, got bool");
}

MPI_Op mpi_op(ReduceOp r) {
  switch (r) {
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
    default:
      return MPI_SUM;  // avg: the sum, then divided by the world size
  }
}

template <typename T>
void divide(void* data, int64_t n, int world) {
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<T>(world);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owns_init_ = true;
    } else {
      // The application initialised MPI: Kiln's calls come from its own thread.
      int level = 0;
      MPI_Query_thread(&level);
      KILN_CHECK(level == MPI_THREAD_MULTIPLE,
                 "distributed: MPI was initialised by the application without "
                 "MPI_THREAD_MULTIPLE; Kiln calls MPI from its communication thread (initialise "
                 "with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or let Kiln do it)");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    // After a failure a peer may be gone, and finalising would wait for it; a
    // process exiting with an error leaves at once (mpirun reports its status).
    if (!finalize_) return;
    MPI_Comm_free(&comm_);
    if (owns_init_) MPI_Finalize();
  }

  void leave(int exit_status) override {
    finalize_ = !broken_ && exit_status <= 0;
    if (size_ == 1 || collective_pending_) return;
    // Best effort, briefly: a rank may be gone.
    departure_ = departure(seq_, completed_, exit_status);
    receive_departures();
    std::vector<MPI_Request> reqs;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || std::any_of(departed_.begin(), departed_.end(),
                                    [&](const auto& d) { return d.first == r; }))
        continue;  // itself, or a rank that left
      MPI_Request q = MPI_REQUEST_NULL;
      if (MPI_Isend(&departure_, sizeof(Arrival), MPI_BYTE, r, kDepartureTag, comm_, &q) ==
          MPI_SUCCESS)
        reqs.push_back(q);
    }
    // A small message to a live rank completes at once (MPI buffers it); one to
    // a rank that died never does.
    const auto deadline = deadline_after(0.25);
    for (int spins = 0; !reqs.empty() && Clock::now() < deadline; ++spins) {
      int done = 0;
      if (MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE) !=
              MPI_SUCCESS ||
          done)
        break;
      backoff(spins);
    }
    // This rank failed because another left with an error: mpirun reports the
    // status of the first rank it sees end, so give that rank's exit (it sent
    // its departure first, then went on exiting) a head start.
    if (first_failed_departure_)
      std::this_thread::sleep_until(*first_failed_departure_ + std::chrono::milliseconds(500));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void run(const CollectiveCall& c, const void* send, void* recv, double timeout_s) override {
    const auto deadline = deadline_after(timeout_s);
    arrive(c, false, deadline, timeout_s);
    const MPI_Datatype type = mpi_type(c.dtype, c.what);
    const int count = checked_count(c.count, c.what);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    switch (c.op) {
      case OpKind::all_reduce:
        rc = MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, count, type,
                            mpi_op(c.reduce), comm_, &req);
        break;
      case OpKind::reduce_scatter:
        rc = MPI_Ireduce_scatter_block(send, recv, count / size_, type, mpi_op(c.reduce), comm_,
                                       &req);
        break;
      case OpKind::all_gather:
        rc = MPI_Iallgather(send, count, type, recv, count, type, comm_, &req);
        break;
      case OpKind::broadcast:
        if (rank_ == c.root && count && send != recv) std::memcpy(recv, send, static_cast<size_t>(c.count) * dtype_size(c.dtype));
        rc = MPI_Ibcast(recv, count, type, c.root, comm_, &req);
        break;
      default:
        throw Error(std::string("internal: ") + op_name(c.op) + " is not a collective");
    }
    if (rc != MPI_SUCCESS) fail(c.what + ": MPI failed to start it: " + mpi_error_string(rc));
    // Until it completes MPI may write into `recv`; if it fails, no later MPI
    // call may let it (leave() then sends nothing).
    collective_pending_ = true;
    poll(&req, deadline, [&] {
      return c.what + " did not complete within " + seconds(timeout_s) +
             " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
             ": every rank arrived, so a rank stopped or died during it";
    });
    collective_pending_ = false;
    completed_ = seq_;
    if (c.reduce == ReduceOp::avg &&
        (c.op == OpKind::all_reduce || c.op == OpKind::reduce_scatter)) {
      const int64_t n = collective_recv_count(c, size_);
      if (c.dtype == DType::f32) divide<float>(recv, n, size_);
      else if (c.dtype == DType::f64) divide<double>(recv, n, size_);
      else throw Error("distributed: " + c.what + ": avg needs a floating-point tensor");
    }
  }

  void barrier(double timeout_s) override {
    CollectiveCall c;
    c.what = "barrier";
    arrive(c, true, deadline_after(timeout_s), timeout_s);
    completed_ = seq_;
  }
  // A call whose data goes another way (NCCL): its MPI part ends here.
  void arrive(const CollectiveCall& c, double timeout_s) override {
    arrive(c, false, deadline_after(timeout_s), timeout_s);
    completed_ = seq_;
  }

 private:
  using Clock = std::chrono::steady_clock;

  static Clock::time_point deadline_after(double s) {
    return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(s * 1e6));
  }
  static std::string seconds(double s) {
    std::string t = std::to_string(s);
    t.erase(t.find_last_not_of('0') + 1);
    if (!t.empty() && t.back() == '.') t.pop_back();
    return t + " s";
  }
  int checked_count(int64_t n, const std::string& what) const {
    KILN_CHECK(n <= INT32_MAX, "distributed: ", what, ": ", n,
               " elements exceed MPI's count limit (2^31 - 1); split the tensor");
    return static_cast<int>(n);
  }

  // Between polls: MPI progresses a nonblocking collective only inside MPI
  // calls, so poll tightly (yielding the core) for the first 20 ms, which is
  // what a blocking MPI call would do; then every 50 us, for a late rank.
  static void backoff(int spins) {
    if (spins < 20000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  [[noreturn]] void fail(const std::string& why) {
    broken_ = true;
    throw Error("distributed: " + why);
  }

  // Polls `req` until it completes or the deadline passes (then fail(message())),
  // or a rank leaves that had not completed this call.
  template <typename Message>
  void poll(MPI_Request* req, Clock::time_point deadline, Message message) {
    for (int spins = 0;; ++spins) {
      int done = 0;
      MPI_Status status;
      int rc = MPI_Test(req, &done, &status);
      if (rc != MPI_SUCCESS) fail(message() + " (" + mpi_error_string(rc) + ")");
      if (done) return;
      check_interrupted(message);
      receive_departures();
      for (const auto& [r, d] : departed_)
        if (d.completed < seq_) fail(departure_message(mine_, rank_, size_, d, r));
      if (Clock::now() > deadline) fail(message());
      backoff(spins);
    }
  }

  template <typename Message>
  void check_interrupted(Message message) {
    if (interrupted()) fail(message() + ": stopped, this process is exiting");
  }

  // Takes the departure records that have come (they are never waited for).
  void receive_departures() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kDepartureTag, comm_, &flag, &st) != MPI_SUCCESS || !flag)
        return;
      Arrival d;
      MPI_Recv(&d, sizeof(Arrival), MPI_BYTE, st.MPI_SOURCE, kDepartureTag, comm_,
               MPI_STATUS_IGNORE);
      departed_.emplace_back(st.MPI_SOURCE, d);
      if (d.exit_status > 0 && !first_failed_departure_) first_failed_departure_ = Clock::now();
    }
  }

  // Every rank tells every other what it is about to run (an Arrival) and
  // waits for theirs; then all compare.
  void arrive(const CollectiveCall& c, bool barrier, Clock::time_point deadline, double timeout_s) {
    ++seq_;
    mine_ = arrival_of(c, seq_, barrier);
    const std::string& what = c.what;
    auto stopped = [&] { return what + " on rank " + std::to_string(rank_) + " not run"; };
    check_interrupted(stopped);
    if (size_ == 1) return;
    // A member: after a failure, a late record may still be written into it.
    std::vector<Arrival>& theirs = theirs_;
    theirs.assign(static_cast<size_t>(size_), Arrival{});
    std::vector<MPI_Request> reqs;
    std::vector<int> peers;
    sends_.clear();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request s, q;
      MPI_Isend(&mine_, sizeof(Arrival), MPI_BYTE, r, kArrivalTag, comm_, &s);
      MPI_Irecv(&theirs[static_cast<size_t>(r)], sizeof(Arrival), MPI_BYTE, r, kArrivalTag, comm_,
                &q);
      reqs.push_back(q);
      peers.push_back(r);
      sends_.push_back(s);
    }
    for (int spins = 0;; ++spins) {
      std::vector<int> missing;
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        int done = 0;
        int rc = MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
          fail(what + " on rank " + std::to_string(rank_) + ": rank " + std::to_string(peers[i]) +
               " failed (" + mpi_error_string(rc) + ")");
        if (!done) missing.push_back(peers[i]);
      }
      if (missing.empty()) break;
      check_interrupted(stopped);
      // A missing rank that left before this call will never arrive (one
      // that left after arriving has sent its record: it comes).
      receive_departures();
      for (const auto& [r, d] : departed_)
        if (d.seq < seq_ && std::find(missing.begin(), missing.end(), r) != missing.end())
          fail(departure_message(mine_, rank_, size_, d, r));
      if (Clock::now() > deadline)
        fail(what + " timed out after " + seconds(timeout_s) + " on rank " +
             std::to_string(rank_) + " of " + std::to_string(size_) + ": rank" +
             (missing.size() > 1 ? "s " : " ") + rank_list(missing) +
             " never arrived (collective #" + std::to_string(seq_) + ")");
      backoff(spins);
    }
    for (int r : peers) {
      const Arrival& a = theirs[static_cast<size_t>(r)];
      if (a.seq != seq_)
        fail(what + " on rank " + std::to_string(rank_) + " (its collective #" +
             std::to_string(seq_) + ") met rank " + std::to_string(r) + " at its collective #" +
             std::to_string(a.seq) + ": the ranks are running different programs");
    }
    // Every rank compares with every other, so all fail together, each naming
    // its own call and the first rank that disagrees with it.
    for (int r : peers) {
      std::string differ = arrival_mismatch(mine_, rank_, theirs[static_cast<size_t>(r)], r);
      if (!differ.empty()) fail(differ);
    }
    // The sends complete as the receivers match them (never wait on a rank
    // that left: it may not). Then, a rank that arrived but left without
    // completing this call: start nothing.
    for (int spins = 0;; ++spins) {
      std::vector<int> unsent;
      for (size_t i = 0; i < sends_.size(); ++i) {
        if (sends_[i] == MPI_REQUEST_NULL) continue;
        int done = 0;
        if (MPI_Test(&sends_[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
        if (!done) unsent.push_back(peers[i]);
      }
      receive_departures();
      for (const auto& [r, d] : departed_)
        if (d.completed < seq_) fail(departure_message(mine_, rank_, size_, d, r));
      if (unsent.empty()) break;
      check_interrupted(stopped);
      if (Clock::now() > deadline)
        fail(what + " timed out after " + seconds(timeout_s) + " on rank " + std::to_string(rank_) +
             " of " + std::to_string(size_) + ": rank" + (unsent.size() > 1 ? "s " : " ") +
             rank_list(unsent) + " arrived but never took this rank's arrival (collective #" +
             std::to_string(seq_) + ")");
      backoff(spins);
    }
    sends_.clear();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  int64_t seq_ = 0, completed_ = 0;  // collectives begun (arrived at) and completed
  Arrival mine_, departure_;         // the current call's record; the one leave() sends
  std::vector<Arrival> theirs_;      // the other ranks' records for the current call
  std::vector<std::pair<int, Arrival> > departed_;           // ranks that left, with their records
  std::optional<Clock::time_point> first_failed_departure_;  // of one with a nonzero status
  std::vector<MPI_Request> sends_;
  bool owns_init_ = false, broken_ = false, finalize_ = true, collective_pending_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() {
  return std::make_unique<MpiCommunicator>();
}

#endif

}  // namespace kiln
