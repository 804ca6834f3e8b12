// c10d's process groups on Kiln, for data-parallel programs written against
// libtorch's c10d (#include <c10d/ProcessGroupMPI.hpp>, or its newer path
// torch/csrc/distributed/c10d/ProcessGroupMPI.hpp). A process group is Kiln's
// world of ranks (kiln::distributed, started by mpirun); its collectives are
// Kiln's (all_reduce, broadcast, all_gather, barrier), eagerly and inside a
// traced step alike. Each returns a completed Work: Kiln's collectives finish
// before they return eagerly, and in a compiled plan the plan waits for them
// before their first reader, so wait() has nothing left to wait for.
#pragma once

#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "torch/types.h"

namespace c10 {
/// A shared pointer, as c10::intrusive_ptr is used: ->, *, get(), and
/// conversions to and from std::shared_ptr (older c10d returned those).
template <class T>
class intrusive_ptr {
 public:
  intrusive_ptr() = default;
  intrusive_ptr(std::nullptr_t) {}                           // NOLINT
  intrusive_ptr(std::shared_ptr<T> p) : p_(std::move(p)) {}  // NOLINT
  template <class U>
    requires std::is_convertible_v<U*, T*> intrusive_ptr(const intrusive_ptr<U>& o)
      : p_(o.shared()) {}  // NOLINT
  T* operator->() const { return p_.get(); }
  T& operator*() const { return *p_; }
  T* get() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }
  template <class U>
    requires std::is_convertible_v<T*, U*>
  operator std::shared_ptr<U>() const {  // NOLINT
    return p_;
  }
  const std::shared_ptr<T>& shared() const { return p_; }

 private:
  std::shared_ptr<T> p_;
};
template <class T, class... Args>
intrusive_ptr<T> make_intrusive(Args&&... args) {
  return intrusive_ptr<T>(std::make_shared<T>(std::forward<Args>(args)...));
}
}  // namespace c10

namespace c10d {

/// The reduction of a collective (c10d::ReduceOp::SUM, ...).
struct ReduceOp {
  enum RedOpType : uint8_t {
    SUM = 0,
    AVG = 1,
    PRODUCT = 2,
    MIN = 3,
    MAX = 4,
    BAND,
    BOR,
    BXOR,
    PREMUL_SUM,
    UNUSED
  };
  ReduceOp(RedOpType op = SUM) : op_(op) {}   // NOLINT
  operator RedOpType() const { return op_; }  // NOLINT
  RedOpType op_;
};

struct AllreduceOptions {
  ReduceOp reduceOp = ReduceOp::SUM;
  std::chrono::milliseconds timeout = std::chrono::milliseconds(-1);
};
struct BroadcastOptions {
  int64_t rootRank = 0;
  int64_t rootTensor = 0;
  std::chrono::milliseconds timeout = std::chrono::milliseconds(-1);
};
struct AllgatherOptions {
  std::chrono::milliseconds timeout = std::chrono::milliseconds(-1);
};
struct BarrierOptions {
  std::chrono::milliseconds timeout = std::chrono::milliseconds(-1);
};

/// A collective's handle: complete when returned (see the file comment).
class Work {
 public:
  explicit Work(std::vector<torch::Tensor> result = {}) : result_(std::move(result)) {}
  virtual ~Work() = default;
  bool isCompleted() { return true; }
  bool isSuccess() const { return true; }
  std::exception_ptr exception() const { return nullptr; }
  /// Returns true: the collective has finished (errors were thrown by the call).
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) { return true; }
  void synchronize() {}
  virtual void abort() {}
  std::vector<torch::Tensor> result() { return result_; }

 private:
  std::vector<torch::Tensor> result_;
};

namespace detail {
inline kiln::ReduceOp kiln_op(ReduceOp op) {
  switch (op.op_) {
    case ReduceOp::SUM:
      return kiln::ReduceOp::sum;
    case ReduceOp::AVG:
      return kiln::ReduceOp::avg;
    case ReduceOp::MIN:
      return kiln::ReduceOp::min;
    case ReduceOp::MAX:
      return kiln::ReduceOp::max;
    default:
      throw kiln::Error("c10d: reduce op " + std::to_string(int(op.op_)) +
                        " is not supported (Kiln reduces with SUM, AVG, MIN and MAX)");
  }
}
}  // namespace detail

/// The ranks of a job and their collectives.
class ProcessGroup {
 public:
  using Work = ::c10d::Work;
  ProcessGroup(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~ProcessGroup() = default;
  int getRank() const { return rank_; }
  int getSize() const { return size_; }
  virtual const std::string getBackendName() const { return kiln::distributed::backend(); }

  /// Reduces each tensor over the ranks in place.
  virtual c10::intrusive_ptr<Work> allreduce(std::vector<torch::Tensor>& tensors,
                                             const AllreduceOptions& opts = AllreduceOptions()) {
    for (torch::Tensor& t : tensors)
      kiln::distributed::all_reduce(t, detail::kiln_op(opts.reduceOp));
    return c10::make_intrusive<Work>(tensors);
  }
  /// Every rank's tensors become rank rootRank's, in place.
  virtual c10::intrusive_ptr<Work> broadcast(std::vector<torch::Tensor>& tensors,
                                             const BroadcastOptions& opts = BroadcastOptions()) {
    for (torch::Tensor& t : tensors)
      kiln::distributed::broadcast(t, static_cast<int>(opts.rootRank));
    return c10::make_intrusive<Work>(tensors);
  }
  /// outputs[i][r] becomes rank r's inputs[i].
  virtual c10::intrusive_ptr<Work> allgather(std::vector<std::vector<torch::Tensor>>& outputs,
                                             std::vector<torch::Tensor>& inputs,
                                             const AllgatherOptions& = AllgatherOptions()) {
    if (outputs.size() != inputs.size())
      throw kiln::Error("c10d allgather: " + std::to_string(outputs.size()) + " output lists for " +
                        std::to_string(inputs.size()) + " inputs (expected one list per input)");
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (outputs[i].size() != static_cast<size_t>(size_))
        throw kiln::Error("c10d allgather: output list " + std::to_string(i) + " holds " +
                          std::to_string(outputs[i].size()) + " tensors (expected one per rank, " +
                          std::to_string(size_) + ")");
      torch::Tensor all = kiln::distributed::all_gather(inputs[i].unsqueeze(0));
      for (int r = 0; r < size_; ++r) outputs[i][size_t(r)].copy_(all[r]);
    }
    return c10::make_intrusive<Work>(inputs);
  }
  virtual c10::intrusive_ptr<Work> barrier(const BarrierOptions& = BarrierOptions()) {
    kiln::distributed::barrier();
    return c10::make_intrusive<Work>();
  }

 protected:
  int rank_, size_;
};

/// The process group of an MPI job (mpirun; alone, a world of one).
class ProcessGroupMPI : public ProcessGroup {
 public:
  ProcessGroupMPI(int rank, int size) : ProcessGroup(rank, size) {}
  /// Starts Kiln's MPI world if it is not started yet. Only the whole world:
  /// a list of ranks other than all of them is an error.
  static c10::intrusive_ptr<ProcessGroupMPI> createProcessGroupMPI(std::vector<int> ranks = {}) {
    if (!kiln::distributed::is_initialized()) {
      kiln::distributed::InitOptions o;
      o.backend = "mpi";
      kiln::distributed::init(o);
    }
    const int size = kiln::distributed::world_size();
    if (!ranks.empty() && static_cast<int>(ranks.size()) != size)
      throw kiln::Error("createProcessGroupMPI: a group of " + std::to_string(ranks.size()) +
                        " ranks; Kiln's process groups are the whole world (" +
                        std::to_string(size) + " ranks)");
    return c10::make_intrusive<ProcessGroupMPI>(kiln::distributed::rank(), size);
  }
  /// Ends this process with status 1 (libtorch calls MPI_Abort): the other
  /// ranks learn that it left, and their collectives fail at once.
  void abort() {
    std::cerr << "ProcessGroupMPI::abort() on rank " << rank_ << std::endl;
    std::exit(EXIT_FAILURE);
  }
};

}  // namespace c10d
