// NCCL, loaded at run time (see nccl.h), and the NCCL communicator
// (collective.h). One X-macro lists every NCCL function Kiln calls; the loader
// dlopens libnccl.so.2 and resolves the list with dlsym into one table
// (runtime/dl_table.h). nccl.h is included for declarations and types only:
// nothing links NCCL.
//
// The communicator wraps a host communicator (MPI, or a world of one): host
// buffers go there, and it carries NCCL's unique id from rank 0 to the others.
// A call over device buffers first meets the other ranks through the host
// communicator (so a rank that never arrives is named, as with MPI), then is
// queued on the device's collective stream after the compute stream's `ready`
// event, and polled until its `done` event passes, NCCL reports an error, or
// the deadline passes; then the NCCL communicator is aborted (NCCL itself has
// no timeout) and the call fails.
#include "runtime/nccl.h"

#include <cstdlib>
#include <mutex>

#include "ir/error.h"

#if KILN_HAVE_CUDA_TOOLKIT && __has_include(<nccl.h>)
#define KILN_HAVE_NCCL_HEADER 1
#include <nccl.h>

#include <chrono>
#include <thread>

#include "runtime/dl_table.h"
#endif

namespace kiln {

LocalRank local_rank(int rank, int world) {
  const std::pair<const char*, const char*> launchers[] = {
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},  // Open MPI
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},                        // MPICH (Hydra)
  };
  for (auto [r, n] : launchers) {
    const char* rs = std::getenv(r);
    const char* ns = std::getenv(n);
    if (rs && ns) return {std::atoi(rs), std::max(std::atoi(ns), 1)};
  }
  return {rank, world};
}

#ifndef KILN_HAVE_NCCL_HEADER

namespace {
const char* kNoNccl =
    "NCCL is not available: this build of Kiln has no CUDA support or no nccl.h (the CUDA "
    "toolkit with NCCL was not found when it was built)";
}

bool nccl_available() {
  return false;
}
std::string nccl_unavailable_reason() {
  return kNoNccl;
}
int nccl_version() {
  return 0;
}
std::string nccl_info() {
  return kNoNccl;
}
std::vector<cuda::EntryPoint> nccl_entry_points() {
  return {};
}
std::string nccl_call_str(const CollectiveCall&) {
  throw Error(kNoNccl);
}
void reload_nccl_for_testing(const std::string&) {}
std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator>, double) {
  throw Error(std::string("distributed: backend nccl: ") + kNoNccl);
}

#else

namespace {

// clang-format off
#define KILN_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion) \
  X(ncclGetErrorString) \
  X(ncclGetUniqueId) \
  X(ncclCommInitRank) \
  X(ncclCommDestroy) \
  X(ncclCommAbort) \
  X(ncclCommGetAsyncError) \
  X(ncclAllReduce) \
  X(ncclBroadcast) \
  X(ncclAllGather) \
  X(ncclReduceScatter)
// clang-format on

KILN_DL_TABLE(Api, KILN_NCCL_FUNCTIONS, KILN_DL_AS_EXPORTED);

// ncclAvg (NCCL 2.10) is the oldest feature Kiln needs.
constexpr int kMinVersion = 21000;

struct Nccl {
  std::string library;  // what was opened
  std::string error;    // non-empty: unavailable, and why
  Api api;
  int version = 0;
};

std::string version_str(int v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

Nccl* load(const std::string& library) {
  auto* n = new Nccl();
  const std::string prefix = "NCCL is not available: ";
  // Where the loader finds it, else the CUDA toolkit's copy.
  dl::Library lib = dl::open(library, {"/usr/local/cuda/lib64"});
  if (!lib.handle) {
    n->error = prefix + lib.error +
               "; collectives on CUDA tensors need NCCL (it ships with the CUDA toolkit; set "
               "KILN_NCCL_LIBRARY to its path) or backend mpi";
    return n;
  }
  n->library = lib.path;
  if (std::string missing = dl::resolve(n->api, n->library, lib.handle); !missing.empty()) {
    n->error = prefix + missing;
    return n;
  }
  ncclResult_t r = n->api.ncclGetVersion(&n->version);
  if (r != ncclSuccess) {
    n->error = prefix + "ncclGetVersion in " + n->library + " failed (" +
               n->api.ncclGetErrorString(r) + ")";
  } else if (n->version < kMinVersion) {
    n->error = prefix + n->library + " is NCCL " + version_str(n->version) +
               " (expected 2.10 or newer, for ncclAvg)";
  }
  return n;
}

std::string default_library() {
  const char* env = std::getenv("KILN_NCCL_LIBRARY");
  return env && *env ? env : "libnccl.so.2";
}

// The loaded library; replaced (never freed) by reload_nccl_for_testing.
std::mutex g_mu;
Nccl* g_nccl = nullptr;
std::string g_override;

Nccl& nccl() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_nccl) g_nccl = load(g_override.empty() ? default_library() : g_override);
  return *g_nccl;
}

Nccl& ready() {
  Nccl& n = nccl();
  if (!n.error.empty()) throw Error(n.error);
  return n;
}

// NCCL's type and reduction for a call, with their names (nccl_call_str).
struct Mapped {
  ncclDataType_t type;
  const char* type_name;
  ncclRedOp_t op;
  const char* op_name;
};

Mapped map_call(const CollectiveCall& c) {
  Mapped m{};
  switch (c.dtype) {
    case DType::f32:
      m = {ncclFloat32, "ncclFloat32", ncclSum, ""};
      break;
    case DType::f64:
      m = {ncclFloat64, "ncclFloat64", ncclSum, ""};
      break;
    case DType::i32:
      m = {ncclInt32, "ncclInt32", ncclSum, ""};
      break;
    case DType::i64:
      m = {ncclInt64, "ncclInt64", ncclSum, ""};
      break;
    case DType::u8:
      m = {ncclUint8, "ncclUint8", ncclSum, ""};
      break;
    case DType::i8:
      m = {ncclInt8, "ncclInt8", ncclSum, ""};
      break;
    case DType::i16:
      throw Error("distributed: " + c.what +
                  ": NCCL has no int16 type (convert the tensor to int32)");
    case DType::b8:
      throw Error("distributed: " + c.what + ": expected a numeric tensor, got bool");
  }
  switch (c.reduce) {
    case ReduceOp::sum:
      m.op = ncclSum, m.op_name = "ncclSum";
      break;
    case ReduceOp::avg:
      // As with MPI: an integer average would round, so it is refused.
      if (c.dtype != DType::f32 && c.dtype != DType::f64 &&
          (c.op == OpKind::all_reduce || c.op == OpKind::reduce_scatter))
        throw Error("distributed: " + c.what + ": avg needs a floating-point tensor");
      m.op = ncclAvg, m.op_name = "ncclAvg";
      break;
    case ReduceOp::max:
      m.op = ncclMax, m.op_name = "ncclMax";
      break;
    case ReduceOp::min:
      m.op = ncclMin, m.op_name = "ncclMin";
      break;
  }
  return m;
}

std::string seconds(double s) {
  std::string t = std::to_string(s);
  t.erase(t.find_last_not_of('0') + 1);
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t + " s";
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> host, double timeout_s) : host_(std::move(host)) {
    api_ = &ready().api;
    const Api& api = *api_;
    rank_ = host_->rank();
    size_ = host_->size();
    const std::string where = "distributed: backend nccl (rank " + std::to_string(rank_) + " of " +
                              std::to_string(size_) + ")";
    cuda::require(where.c_str());
    const int devices = cuda::device_count();
    const LocalRank local = local_rank(rank_, size_);
    if (local.size > devices)
      throw Error(where + ": " + std::to_string(local.size) +
                  " ranks run on this machine but it has " + std::to_string(devices) +
                  " CUDA device" + (devices == 1 ? "" : "s") +
                  "; NCCL needs a device of its own for each rank (start at most " +
                  std::to_string(devices) +
                  " ranks per machine, e.g. mpirun -H host1:N,host2:N, or use backend mpi, which "
                  "stages CUDA tensors through host memory)");
    device_ = local.rank % devices;
    cuda::require(where.c_str(), device_);  // makes its context current on this thread
    stream_ = cuda::collective_stream(device_);

    ncclUniqueId id{};
    static_assert(sizeof(id) % sizeof(int32_t) == 0, "the id travels as int32s");
    if (rank_ == 0) check(api.ncclGetUniqueId(&id), "ncclGetUniqueId");
    CollectiveCall share;
    share.op = OpKind::broadcast;
    share.dtype = DType::i32;
    share.count = sizeof(id) / sizeof(int32_t);
    share.what = "NCCL's unique id (distributed::init)";
    host_->run(share, &id, &id, timeout_s);
    check(api.ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }

  ~NcclCommunicator() override {
    // After an abort the communicator is gone; a peer may be too.
    if (comm_) api_->ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  int device() const override { return device_; }
  void run(const CollectiveCall& c, const void* send, void* recv, double timeout_s) override {
    host_->run(c, send, recv, timeout_s);
  }
  void barrier(double timeout_s) override { host_->barrier(timeout_s); }
  void arrive(const CollectiveCall& c, double timeout_s) override { host_->arrive(c, timeout_s); }
  void leave(int exit_status) override { host_->leave(exit_status); }
  void interrupt() override {
    Communicator::interrupt();
    host_->interrupt();
  }

  void run_device(const CollectiveCall& c, const void* send, void* recv, const cuda::Event& ready,
                  cuda::Event& done, double timeout_s) override {
    const auto deadline =
        Clock::now() + std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
    KILN_CHECK(comm_, "distributed: ", c.what, " not run: the NCCL communicator was aborted");
    const Api& api = *api_;
    const Mapped m = map_call(c);
    host_->arrive(c, timeout_s);
    ready.wait_on(stream_);
    const auto n = static_cast<size_t>(c.count);
    switch (c.op) {
      case OpKind::all_reduce:
        check(api.ncclAllReduce(send, recv, n, m.type, m.op, comm_, stream()), c.what.c_str());
        break;
      case OpKind::broadcast:
        check(api.ncclBroadcast(send, recv, n, m.type, c.root, comm_, stream()), c.what.c_str());
        break;
      case OpKind::all_gather:
        check(api.ncclAllGather(send, recv, n, m.type, comm_, stream()), c.what.c_str());
        break;
      case OpKind::reduce_scatter:
        check(api.ncclReduceScatter(send, recv, n / static_cast<size_t>(size_), m.type, m.op, comm_,
                                    stream()),
              c.what.c_str());
        break;
      default:
        throw Error(std::string("internal: ") + op_name(c.op) + " is not a collective");
    }
    done.record_on(stream_);
    for (int spins = 0; !done.done(); ++spins) {
      ncclResult_t async = ncclSuccess;
      check(api.ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
      if (async != ncclSuccess && async != ncclInProgress)
        abort(c.what + " failed on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
              ": NCCL reports " + api.ncclGetErrorString(async));
      if (interrupted())
        abort(c.what + " on rank " + std::to_string(rank_) + ": stopped, this process is exiting");
      if (Clock::now() > deadline)
        abort(c.what + " did not complete within " + seconds(timeout_s) + " on rank " +
              std::to_string(rank_) + " of " + std::to_string(size_) +
              " (NCCL, cuda:" + std::to_string(device_) +
              "): every rank arrived, so a rank stopped or died during it");
      if (spins < 1000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }

 private:
  using Clock = std::chrono::steady_clock;

  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_); }

  void check(ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return;
    throw Error(std::string("distributed: NCCL error in ") + call + " on rank " +
                std::to_string(rank_) + " of " + std::to_string(size_) + ": " +
                api_->ncclGetErrorString(r));
  }

  // Stops the NCCL communicator (its kernels end, its peers' calls fail) and fails.
  [[noreturn]] void abort(const std::string& why) {
    api_->ncclCommAbort(comm_);
    comm_ = nullptr;
    throw Error("distributed: " + why);
  }

  std::unique_ptr<Communicator> host_;
  const Api* api_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
  void* stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_available() {
  return nccl().error.empty();
}
std::string nccl_unavailable_reason() {
  return nccl().error;
}
int nccl_version() {
  Nccl& n = nccl();
  return n.error.empty() ? n.version : 0;
}
std::string nccl_info() {
  Nccl& n = nccl();
  if (!n.error.empty()) return n.error;
  return "NCCL " + version_str(n.version) + " (" + n.library + ")";
}

std::vector<cuda::EntryPoint> nccl_entry_points() {
  return dl::entry_points(nccl().api);
}

std::string nccl_call_str(const CollectiveCall& c) {
  const Mapped m = map_call(c);
  switch (c.op) {
    case OpKind::all_reduce:
      return std::string("ncclAllReduce(") + m.type_name + ", " + m.op_name + ")";
    case OpKind::reduce_scatter:
      return std::string("ncclReduceScatter(") + m.type_name + ", " + m.op_name + ")";
    case OpKind::all_gather:
      return std::string("ncclAllGather(") + m.type_name + ")";
    case OpKind::broadcast:
      return std::string("ncclBroadcast(") + m.type_name + ", root " + std::to_string(c.root) + ")";
    default:
      throw Error(std::string("internal: ") + op_name(c.op) + " is not a collective");
  }
}

void reload_nccl_for_testing(const std::string& library) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_override = library;
  static auto* retired = new std::vector<Nccl*>();  // kept: tables may still be in use
  if (g_nccl) retired->push_back(g_nccl);
  g_nccl = nullptr;
}

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host,
                                                     double timeout_s) {
  return std::make_unique<NcclCommunicator>(std::move(host), timeout_s);
}

#endif

}  // namespace kiln
