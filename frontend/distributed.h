// kiln::distributed: data parallelism across processes (torch.distributed /
// c10d names). Ranks are processes started by mpirun (MPI for CPU tensors, and
// NCCL for CUDA tensors with backend nccl, one GPU per rank); without a
// launcher init() gives a world of one process. Every collective is an op
// (IR ops all_reduce, all_gather, reduce_scatter, broadcast): eagerly it runs
// at once on the communication thread; inside a trace it is a node, and the
// compiled plan starts it as soon as its operands are ready and waits for it
// just before its first reader. DistributedDataParallel averages gradients
// after every backward(), so a traced training step with it is one plan whose
// gradient all-reduces overlap the rest of the backward pass.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frontend/nn.h"
#include "frontend/tensor.h"
#include "ir/op.h"

namespace kiln::distributed {

using kiln::ReduceOp;

struct InitOptions {
  /// "auto": under an MPI launcher (mpirun) NCCL when CUDA and NCCL are
  /// available and this machine has a CUDA device for each of its ranks, else
  /// MPI; started alone, one process.
  /// "mpi": MPI always (a lone process is a world of one); CUDA tensors are
  /// copied through host memory.
  /// "nccl": CUDA tensors over NCCL on the device (one device per rank: the
  /// local rank's, modulo the device count), CPU tensors over MPI (or, started
  /// alone, a world of one NCCL rank). "self": one process.
  std::string backend = "auto";
  /// A collective that does not complete in this time fails on every rank that
  /// waits for it, naming it and the ranks that never arrived (KILN_DIST_TIMEOUT
  /// overrides the default).
  double timeout_s = 300;
};

/// Starts the communication thread (and MPI, and NCCL). Throws kiln::Error when
/// already initialised, or when the backend asked for cannot run here (MPI in a
/// build without it; NCCL without a CUDA device or without libnccl.so.2),
/// saying what it needs and what it found.
void init(const InitOptions& opts = {});
bool is_initialized();
/// Stops the communication thread and finalises MPI (also done at exit).
void finalize();
int rank();
int world_size();
/// "mpi", "nccl" or "self".
std::string backend();
/// The CUDA device this rank's NCCL collectives run on; -1 unless the backend is nccl.
int device();
void barrier();
void set_timeout(double seconds);

/// Reduces `t` over the ranks, in place (every rank gets the result), as
/// torch.distributed.all_reduce. No gradient flows through it.
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum, KILN_LOC);
/// Every rank's `t` becomes rank `root`'s, in place.
void broadcast(Tensor& t, int root = 0, KILN_LOC);
/// Every rank's `t`, concatenated along dim 0 in rank order (all_gather_into_tensor).
Tensor all_gather(const Tensor& t, KILN_LOC);
/// Reduces over the ranks, then returns this rank's 1/world_size of dim 0
/// (reduce_scatter_tensor); dim 0 must divide by the world size.
Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::sum, KILN_LOC);

struct DDPOptions {
  /// Gradients are all-reduced in buckets of about this size (PyTorch's bucket_cap_mb).
  double bucket_cap_mb = 25;
  /// Copy rank 0's parameters to every rank when the wrapper is made.
  bool broadcast_parameters = true;
};

/// Data parallelism around a module (torch.nn.parallel.DistributedDataParallel):
/// on construction every rank gets rank 0's parameters; after every backward()
/// that reaches the module's parameters, the gradient of each parameter it
/// reached is averaged over the ranks, so each rank's optimizer takes the same
/// step. A backward() over a graph without them communicates nothing. Eagerly
/// one all_reduce per parameter; in a trace the plan groups them into buckets
/// that start while the rest of the backward still runs. Every rank must run
/// the same steps (as in PyTorch): ranks whose calls differ fail, each naming
/// both calls.
class DistributedDataParallel {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions opts = {},
                                   KILN_LOC);
  template <class Holder>
    requires requires(const Holder& h) { h.ptr(); }
  explicit DistributedDataParallel(const Holder& module, DDPOptions opts = {}, KILN_LOC)
      : DistributedDataParallel(std::static_pointer_cast<nn::Module>(module.ptr()), opts, loc) {}
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  nn::Module& module() const { return *module_; }
  std::vector<Tensor> parameters() const { return module_->parameters(); }
  /// Averages every parameter's gradient now (backward() does it by itself).
  void sync_gradients(KILN_LOC);

  /// While one lives, backward() accumulates the module's gradients locally
  /// and communicates nothing (torch's `with ddp.no_sync():`); the first
  /// backward() after the scope averages the accumulated gradients. Gradient
  /// accumulation over k micro-batches: k-1 backward()s inside, the last
  /// outside. Eagerly and in a trace: opened inside a traced step it is part of
  /// the step; a plan traced while one was open outside holds only while one
  /// is (a call in the other state traces again).
  class NoSync {
   public:
    ~NoSync();
    NoSync(NoSync&& o) noexcept : ddp_(o.ddp_), outside_(o.outside_) { o.ddp_ = nullptr; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    friend class DistributedDataParallel;
    explicit NoSync(DistributedDataParallel* ddp);
    DistributedDataParallel* ddp_;
    bool outside_;  // opened outside any trace
  };
  [[nodiscard]] NoSync no_sync();
  /// False inside a no_sync() scope.
  bool require_backward_grad_sync() const { return no_sync_ == 0; }

 private:
  void after_backward(SourceLoc loc, const std::vector<Tensor>& accumulated);
  void sync(const std::vector<Tensor>& params, SourceLoc loc);

  std::shared_ptr<nn::Module> module_;
  DDPOptions opts_;
  int hook_ = 0;
  int no_sync_ = 0, no_sync_outside_ = 0;  // open scopes: all, and those opened outside a trace
  std::shared_ptr<const int> alive_ = std::make_shared<const int>(0);  // for trace guards
};

/// What init() looks at to choose a backend (exposed for tests).
struct BackendProbe {
  bool launched_by_mpi = false, have_mpi = false;
  bool cuda = false, nccl = false;
  std::string cuda_why, nccl_why;    // why not, when not
  int devices = 0, local_ranks = 1;  // CUDA devices and ranks on this machine
};
/// The backend init() runs for `requested` ("mpi", "nccl" or "self"), or the
/// kiln::Error saying why it cannot run here.
std::string resolve_backend(const std::string& requested, const BackendProbe& p);
/// This process's probe; CUDA and NCCL are looked at (loaded) only when
/// `requested` may need them.
BackendProbe probe_backends(const std::string& requested);

/// Splits the indices of a data set of `size` items among the ranks
/// (torch.utils.data.DistributedSampler): shuffled per epoch with `seed` (the
/// same permutation on every rank), padded by repeating indices so every rank
/// gets the same count (or trimmed, with drop_last), then rank r takes every
/// world_size-th index from r.
class DistributedSampler {
 public:
  explicit DistributedSampler(int64_t size, bool shuffle = true, uint64_t seed = 0,
                              bool drop_last = false, int num_replicas = -1, int rank = -1);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  /// This rank's indices for the current epoch.
  std::vector<int64_t> indices() const;
  /// How many indices each rank gets.
  int64_t size() const { return per_rank_; }

 private:
  int64_t dataset_size_, per_rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
  int replicas_, rank_;
  int64_t epoch_ = 0;
};

}  // namespace kiln::distributed
