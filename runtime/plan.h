// A compiled plan: what a traced graph became. Buffers are slots (arguments,
// parameters, planned temporaries, outputs); steps are compiled kernels or
// library calls over slots, in order. Built by codegen/compile.h, run by the
// executor of its device (its backend's execute, codegen/backend.h): CPU plans
// hold CPU kernels and run matmuls with OpenBLAS (execute_cpu_plan below); CUDA
// plans hold GPU kernels (loaded CUfunctions, opaque here) and run matmuls with
// cuBLAS, on the device's stream (cuda_executor.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ir/attrs.h"
#include "ir/device.h"
#include "ir/error.h"
#include "ir/op.h"
#include "runtime/attention.h"
#include "runtime/cluster_logprob.h"
#include "runtime/collective.h"
#include "runtime/profile.h"
#include "runtime/sort.h"
#include "runtime/storage.h"

namespace kiln {

struct CudaLibraryFunctions;  // runtime/cuda_library.h

/// A compiled CPU kernel over dense buffers (then, for a kernel template, a pointer
/// to its parameters): computes outer-loop iterations [begin, end).
using CpuKernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end);

/// A kernel compiled in tiers (CodeTier, runtime/llvm_jit.h) runs `fn`, its quick
/// code, until the optimised code compiled in the background is stored in
/// `*better`; both compute the same bits. Null `better`: fn is all there is.
inline CpuKernelFn kernel_to_run(CpuKernelFn fn, const std::atomic<CpuKernelFn>* better) {
  if (better)
    if (CpuKernelFn b = better->load(std::memory_order_acquire)) return b;
  return fn;
}

struct PlanSlot {
  enum Kind : uint8_t { Arg, Param, Temp, Output };
  Kind kind = Temp;
  int64_t index = 0;  // arg/param index, temp buffer id, or output position
  TensorType type;
  /// A view of another slot's buffer (a folded reshape, passes/schedule.h):
  /// that slot's number, else -1. Its elements are that slot's, in order.
  int32_t view_of = -1;
  int64_t bytes() const { return type.bytes(); }
};

/// How a generated CUDA kernel is launched: the one launch record, filled by the
/// CUDA code generator (codegen/cuda_backend.h) and read by the CUDA executor.
/// The kernel's (begin, end) arguments select part of [0, range); a whole launch
/// passes (0, range). Any grid is correct (the kernel strides over what the grid
/// does not cover); blockDim.y/z must be 1.
struct CudaLaunch {
  enum Kind : uint8_t {
    GridStride,   // elementwise: any grid, each thread strides over [0, range)
    BlockPerRow,  // reductions: one block per outer-loop iteration (row), `block` threads
  };
  Kind kind = GridStride;
  /// Work items. GridStride: the kernel IR's outer trip count, or outer x inner when
  /// the kernel was flattened (an elementwise kernel over rows, see `inner`).
  /// BlockPerRow: rows (a grid of min(range, a few per SM) blocks is enough).
  int64_t range = 1;
  int64_t inner = 1;     // GridStride: work items per outer iteration (1 unless flattened)
  int block = 256;       // threads per block; BlockPerRow needs a multiple of 32, at most 1024
  int shared_bytes = 0;  // dynamic shared memory per block (the kernels use static shared memory)
};

/// What a plan step does; PlanStep::slots are its buffers.
namespace step {

/// A compiled CPU kernel: slots are its arguments in order; the outer loop
/// [0, range) is split across threads in chunks of at least `grain`.
struct CpuKernel {
  CpuKernelFn fn = nullptr;
  /// A kernel template's run-time parameters (sizes, constants), passed after the
  /// buffer pointers; empty for a kernel compiled for its sizes.
  std::vector<int64_t> params;
  int64_t range = 1, grain = 1;

  /// A multi-tensor ("foreach") step: more kernels run in the same pool dispatch,
  /// the parts' ranges laid end to end and split as one (the Adam updates of every
  /// parameter of one optimizer step). No part reads a buffer another writes. Each
  /// part takes `slots` of PlanStep::slots, in order after this kernel's first
  /// `own_slots`; its chunks are at least this kernel's `grain` long.
  struct Part {
    CpuKernelFn fn = nullptr;
    std::vector<int64_t> params;
    int64_t range = 1;
    int32_t slots = 0;
    const std::atomic<CpuKernelFn>* better = nullptr;  // see kernel_to_run
  };
  std::vector<Part> more;
  int32_t own_slots = 0;  // with `more`: how many of PlanStep::slots are this kernel's
  const std::atomic<CpuKernelFn>* better = nullptr;  // see kernel_to_run
  /// Its outer loop [0, range) walks the elements of its one output in order, the
  /// same count each iteration (cpu_compile.cpp checks), so a block of the
  /// output's leading dim is a block of iterations: it may be a matmul's prologue.
  bool in_order = false;
  /// Run by a later step, a Matmul whose `prologue` names this step, block by
  /// block of its batch; the executor skips it where it stands.
  bool deferred = false;
};

/// A loaded CUDA kernel (a CUfunction): slots are its arguments in order.
struct CudaKernel {
  void* fn = nullptr;
  CudaLaunch launch;
};

/// out = alpha * (a @ b) + beta * out on the plan's device (OpenBLAS or cuBLAS):
/// slots a, b, out, and on CUDA an optional bias (a vector over the product's
/// columns, added by cuBLASLt before `relu`).
struct Matmul {
  /// Operand a (b) is read transposed in its last two dims (BLAS does it; no
  /// copy): its slot holds the untransposed value.
  bool trans_a = false, trans_b = false;
  /// beta 1: accumulate into out (an SGD update w - lr * (x^T @ g) written straight into w).
  double alpha = 1, beta = 0;
  bool relu = false;  // CUDA only: cuBLASLt applies relu to the product
  /// CPU only: the group's elementwise epilogue kernel (fn null: none), run on each
  /// block of the product's rows as soon as BLAS has written it, on the thread that
  /// wrote it, while the block is in cache. Its slots follow a, b, out; its outer
  /// loop [0, range) walks the product's rows in order, range / rows iterations a
  /// row (cpu_compile.cpp checks this, and that it writes no operand of the product).
  CpuKernel epilogue;
  /// CPU only: the index in Plan::steps of an earlier step (a CpuKernel,
  /// `deferred`) that writes operand b, or -1. It runs here instead, on each block
  /// of the batch's leading dim just before that block's products, so each block
  /// of b is multiplied while in cache (an implicit-GEMM conv: an image's patches
  /// built, then multiplied). No step between shares a buffer with it, and it
  /// reads no buffer this step writes (cpu_compile.cpp checks).
  int32_t prologue = -1;
};

/// Slots {in, out}: runs check op `op` (ir/ops.def's Check rows: check_index,
/// check_nonzero) on `in`, throwing kiln::Error naming the op the user called
/// (attrs' `name`) and `loc`, then copies it to `out`. Runs on the host for both
/// devices (a CUDA plan waits for its stream there).
struct ValueCheck {
  OpKind op{};
  Attrs attrs;
  SourceLoc loc;  // the user's line that recorded the check
};

/// Slots {in, out}: the sort library step (runtime/sort.h) on the dense buffer
/// `in`, positions into `out`. A CUDA plan runs it with the library kernels
/// the CUDA backend attached (runtime/cuda_library.h); a CPU plan on the host.
struct Sort {
  SortLines lines;
  std::shared_ptr<const CudaLibraryFunctions> cuda;  // CUDA plans: the loaded library kernels
};

/// Slots {q, k, v, out}, or {q, k, v, out, g, grad} for a gradient: the
/// attention library step (runtime/attention.h); `which` is -1 for the forward,
/// else the mask of the gradients it computes (1 q, 2 k, 4 v), laid end to end
/// in `grad` (attention_grad_offsets). Runs as Sort does.
struct Attention {
  AttentionShape shape;
  int which = -1;
  std::shared_ptr<const CudaLibraryFunctions> cuda;  // CUDA plans: the loaded library kernels
};

/// Slots {h, w, t, out}, or {h, w, t, g, grad} for a gradient: the cluster
/// log-probability library step (runtime/cluster_logprob.h); `which` is -1 for
/// the forward, else the mask of the gradients it computes (1 h, 2 w), laid end
/// to end in `grad` (cluster_logprob_grad_offsets). Runs as Sort does.
struct ClusterLogprob {
  ClusterShape shape;
  int which = -1;
  std::shared_ptr<const CudaLibraryFunctions> cuda;  // CUDA plans: the loaded library kernels
};

/// Packs the inputs of plan.collectives[collective] and hands them to the
/// communication thread (runtime/collective.h); the plan goes on. On a CUDA
/// device whose communicator is NCCL they stay on the device: the call is
/// ordered after the stream's work by an event (cuda_executor.cpp).
struct CollectiveStart {
  int32_t collective = -1;
};

/// Waits for plan.collectives[collective] and writes the results into their slots.
struct CollectiveWait {
  int32_t collective = -1;
};

}  // namespace step

struct PlanStep {
  std::string name;
  std::vector<int32_t> slots;
  /// What the compiler counted for the step (profiles show it); may be null.
  std::shared_ptr<const StepCost> cost;
  std::variant<step::CpuKernel, step::CudaKernel, step::Matmul, step::ValueCheck, step::Sort,
               step::Attention, step::ClusterLogprob, step::CollectiveStart, step::CollectiveWait>
      what;
};

/// One bucket of collectives: the same call over its members' elements, packed
/// in order (a bucket of gradient all_reduces is one MPI call).
struct PlanCollective {
  CollectiveCall call;             // count: every member's elements
  std::vector<int32_t> inputs;     // slots, one per member
  std::vector<int32_t> outputs;    // slots, one per member
  int64_t bucket = 0;
  SourceLoc loc;                   // the first member's line, for errors
};

struct Plan {
  Device device;  // where every slot lives and every step runs
  std::vector<PlanSlot> slots;
  std::vector<PlanStep> steps;
  std::vector<PlanCollective> collectives;
  std::vector<int32_t> outputs;  // slot of each graph output
  struct Update {
    int64_t param;
    int32_t slot;
  };
  std::vector<Update> updates;      // written into params after the outputs
  std::vector<int64_t> temp_bytes;  // size of each planned temporary buffer
  int64_t num_args = 0, num_params = 0;
  /// The loaded code of the steps' kernels: freed with the plan (opaque handles
  /// from the backend that loaded them).
  std::vector<std::shared_ptr<const void>> code;
};

/// `n` buffer pointers for one plan run: on the stack up to N, else on the heap
/// (the executors and run_plan pack their pointer arrays here).
template <size_t N>
class PointerScratch {
 public:
  explicit PointerScratch(size_t n) : data_(stack_) {
    if (n > N) {
      heap_.resize(n);
      data_ = heap_.data();
    }
  }
  PointerScratch(const PointerScratch&) = delete;
  PointerScratch& operator=(const PointerScratch&) = delete;
  void** data() { return data_; }
  void*& operator[](size_t i) { return data_[i]; }

 private:
  void* stack_[N];
  std::vector<void*> heap_;
  void** data_;
};

/// Runs a CPU plan. `args`/`params` point at dense buffers of the slots' types (by
/// index); `outputs` at caller-allocated dense buffers for each graph output.
/// Parameter updates are written into `params` after every output is computed.
/// With `keep` non-null, every slot's buffer pointer is recorded there and
/// temporaries are not freed until the caller calls release_kept (for checking).
struct KeptBuffers {
  std::vector<void*> slot_data;
  std::vector<void*> temps;
  std::vector<int64_t> temp_bytes;
  /// Other buffers the caller made for the run (dense copies of strided inputs),
  /// freed by release_kept with the temporaries.
  std::vector<std::shared_ptr<const void>> owned;
};
void execute_cpu_plan(const Plan& plan, void* const* args, void* const* params,
                      void* const* outputs, KeptBuffers* keep = nullptr);
void release_kept(KeptBuffers& keep);

/// Runs an Attention step on host memory: `in` holds its operands' buffers
/// (q, k, v, and out, g for a gradient), `out` its result's (both executors).
void run_attention_step(const step::Attention& a, const void* const* in, void* out);

/// Runs a ClusterLogprob step on host memory: `in` holds its operands' buffers
/// (h, w, t, and g for a gradient), `out` its result's (both executors).
void run_cluster_logprob_step(const step::ClusterLogprob& c, const void* const* in, void* out);

/// Adds step `index` of a plan, run from `start_us` until now, to the profile
/// (runtime/profile.h); a CPU kernel's outer loop [0, range) ran in `parts` parts.
void record_step_event(const PlanStep& step, size_t index, double start_us, int64_t range = 0,
                       int64_t parts = 0);

/// Runs a ValueCheck step on host memory: checks `in` (a dense buffer of
/// `type`), attaching the step's location to the error (both executors).
void check_values_step(const step::ValueCheck& check, const void* in, const TensorType& type);

/// The collectives a plan run has started and not yet waited for (both
/// executors). `start` packs the inputs through `read` (host memory, or a copy
/// from the device), `wait` unpacks through `write`. finish() waits for any still
/// in flight (after a failed step), so no call outlives its run.
class CollectiveRuns {
 public:
  using Read = void (*)(void* host, const void* slot, size_t bytes, int device);
  using Write = void (*)(void* slot, const void* host, size_t bytes, int device);
  CollectiveRuns(const Plan& plan, void* const* ptr, Read read, Write write)
      : plan_(plan), ptr_(ptr), read_(read), write_(write), tickets_(plan.collectives.size()) {}
  ~CollectiveRuns() { finish(); }
  void start(const step::CollectiveStart& s);
  void wait(const step::CollectiveWait& w, const std::string& name);
  void finish() noexcept;

 private:
  const Plan& plan_;
  void* const* ptr_;
  Read read_;
  Write write_;
  std::vector<collectives::Ticket> tickets_;
};

/// Fills ptr[s] with the buffer of every slot of `plan` (both executors).
void resolve_slots(const Plan& plan, void* const* args, void* const* params, void* const* outputs,
                   void* const* temps, void** ptr);

/// A matmul step's operand over a dense buffer of type t: the value itself, or
/// (transposed) a view of its transpose in the last two dims, which BLAS reads as is.
View matmul_operand_view(void* data, const TensorType& t, bool transposed);

}  // namespace kiln
