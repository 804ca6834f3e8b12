// One cached signature of a traced function: its key and guards, the program
// traced for it and that program compiled. Internal to frontend/jit*.cpp.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/program.h"
#include "frontend/jit.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"

namespace kiln::detail {

struct TracedCore::StatsCell {
  std::mutex mu;  // the compile figures (the call counters are under TracedCore::mu_)
  TraceStats stats;
};

/// A tensor a call writes besides its outputs: a captured tensor, or (null) the
/// call's argument at position `arg`.
struct CallTensor {
  std::shared_ptr<TensorImpl> tensor;
  int64_t arg = -1;
  Tensor in(const TraceArgs& args) const {
    return tensor ? Tensor(tensor) : args.tensors[static_cast<size_t>(arg)];
  }
};

/// What happens to a captured tensor's or an argument's .grad after a compiled call.
struct GradWriteback {
  CallTensor target;
  /// Clear: no gradient; FromOutput: the plan's output is the new .grad;
  /// AddOutput: the output is added as eager backward() would (into .grad of a
  /// leaf, or on through the eager graph of an argument computed by ops).
  enum Kind : uint8_t { Clear, FromOutput, AddOutput } kind = Clear;
  size_t output = 0;  // FromOutput, AddOutput: index into the plan's outputs
};

/// A condition the cached plan was compiled under: the tensor's .grad must be
/// the same object (or absent) at call time, else the call retraces.
struct GradGuard {
  std::shared_ptr<TensorImpl> tensor;
  const TensorImpl* expected_grad = nullptr;
  bool expect_zero = false;  // the grad must still be the zeros a plan left
};

/// An argument or captured tensor the body wrote in place with grad on: after
/// the call it holds the history eager mode would give it.
struct HistoryWrite {
  CallTensor target;
  /// Takes: its new value requires grad, and it becomes an output of the call's
  /// tape node (output `user_outputs + k`, k counting those that take); else it
  /// loses its history (the value written required no grad).
  bool takes = false;
};

/// What tracing made of one signature: the graph the plan computes, the
/// tensors it captured, what a call writes besides its outputs, and for an
/// autograd call, its backward and what the call's tape node checks.
struct TracedProgram {
  Graph graph;  // what the compiled plan computes
  /// For dumps (trace's `record`): the graph before the partition, and the partition's record.
  Graph as_traced;
  std::vector<PassRecord> partition_log;
  std::vector<std::shared_ptr<TensorImpl>> params;
  size_t user_outputs = 0;  // the first outputs of the plan go back to the caller
  double trace_ms = 0;

  std::vector<GradWriteback> grad_writebacks;
  /// Gradients the plan leaves all zeros (marked after each run, see known_zero).
  std::vector<std::shared_ptr<TensorImpl>> zero_after;
  std::vector<size_t> zero_outputs;  // outputs (new .grad tensors) that are all zeros
  /// In-place writes to arguments: (argument position, plan output) copied into
  /// the caller's tensor after the call, as the eager ops would have written it.
  std::vector<std::pair<int64_t, size_t>> arg_writes;
  std::vector<HistoryWrite> histories;

  // Autograd call: the plan is the forward (user outputs, written-back grads,
  // then saved values); the backward maps (args, saved, output gradients) to
  // gradients of the wrt tensors. The split's roots are the tape node outputs
  // split.root_outputs (user outputs, then histories; its RootRead::root and
  // wrt_reached_by index into them); its held_reads number the caller's tensors
  // as the call's arguments, then the captured tensors, then the user outputs.
  bool autograd_call = false;
  SplitLayout split;
  /// The backward, traced (compile_program takes it); none when split.backward_freed.
  std::unique_ptr<Graph> backward;
};

/// A call's signature, as the cache keys it: per tensor argument its type and
/// autograd_state (tensor_impl.h), the plain numbers, and the grad mode; all a
/// trace needs of the call.
struct TracedCore::Signature {
  std::vector<TensorType> types;
  std::vector<uint8_t> requires_grad;
  std::vector<double> numbers;
  bool grad_mode = false;
  std::vector<bool> is_tensor;  // per parameter (the same for every call of a function)
  bool operator==(const Signature& o) const;  // NaN numbers are equal
};

/// One cached signature: its key, the conditions it holds under, the program
/// traced for it and that program compiled (codegen/program.h).
struct TracedCore::Entry {
  Signature key;

  // The guards: a call whose state fails one retraces.
  std::vector<GradGuard> guards;
  std::vector<ConstantGuard> constant_guards;  // numbers the body read as constants
  std::vector<HostSync> host_syncs;            // numbers it reads through tensors, synced per call
  std::vector<int64_t> arg_grads_read;         // arguments that must have no .grad at call time
  /// Per captured tensor, its autograd_state when traced: a change retraces.
  std::vector<uint8_t> param_grad_state;
  uint64_t last_use = 0;
  std::atomic<bool> checked{false};  // KILN_CHECK compared its first call

  TracedProgram traced;
  CompiledProgram compiled;
  /// Not ready while `compiled` compiles in the background (settings().background_compile):
  /// calls that find the entry meanwhile run the body eagerly.
  BackgroundCompile background;

  /// What the tape node of each call keeps for its backward (the split and the
  /// captured tensors): made at the first call that needs it and shared by the
  /// nodes, not copied into each (a dozen vectors a call).
  struct TapeShared {
    SplitLayout split;
    std::vector<std::shared_ptr<TensorImpl>> params;
  };
  const std::shared_ptr<const TapeShared>& tape_shared() const {
    std::call_once(tape_once_, [&] {
      tape_ = std::make_shared<const TapeShared>(traced.split, traced.params);
    });
    return tape_;
  }

 private:
  mutable std::once_flag tape_once_;
  mutable std::shared_ptr<const TapeShared> tape_;
};

/// The call's signature, as the cache keys it (jit_signature.cpp).
TracedCore::Signature signature_of(const TraceArgs& args, const std::string& name, SourceLoc where);
/// Why a call did not match a cached signature (compared with the most recent entry).
std::string miss_reason(const TracedCore::Signature& now, const TracedCore::Signature& was);
/// Whether the conditions an entry was traced under still hold; if not, why
/// (of its .grad guards, the last that fails).
bool guards_hold(const TracedCore::Entry& e, std::string* reason);

/// Parameter updates, and the .grad of captured tensors and arguments that a
/// backward() inside the trace produced: extra plan outputs, or parameter updates
/// for grads that exist already. The conditions those hold under go to `guards`.
void collect_grad_writebacks(TraceState& st, TracedProgram& prog, std::vector<GradGuard>& guards,
                             SourceLoc where);
/// Arguments the body wrote in place: their final values become plan outputs
/// that the call copies into the caller's tensors.
void collect_arg_writes(TraceState& st, TracedProgram& prog);
/// Arguments and captured tensors written in place with grad on: their new history
/// or its loss (TracedProgram::histories). Returns the values of those that take the
/// call's history: the tape node's extra outputs.
std::vector<Value> collect_histories(TraceState& st, TracedProgram& prog);

}  // namespace kiln::detail
