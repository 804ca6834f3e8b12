// The background compile queue: one thread compiles plans while the calls that
// need them run another way meanwhile (a traced function's new size of a
// dynamic dimension runs its body eagerly until its plan is ready).
#pragma once

#include <functional>
#include <span>

#include "ir/graph.h"

namespace kiln {

/// What a background compile is for. A plan that calls are waiting for (they run
/// another way meanwhile) goes before code that only replaces code already
/// running (a tiered kernel's optimised code): a new size's plan does not wait
/// behind a first call's tier-up compiles.
enum class CompileUrgency { Needed, Improvement };

/// Runs `task` on the background compile thread. Tasks run one at a time: the
/// needed ones in the order posted (a later size finds the kernel templates an
/// earlier one made), then the improvements in the order posted. Each compiles
/// serially (SerialScope), leaving the thread pool to the calls running
/// meanwhile. A task keeps its own errors (it must not throw).
/// When the main thread exits the process, the queue runs what it holds to the
/// end before any static is destroyed (so optimised kernels reach the disk cache)
/// and takes no more; an exit from another thread finishes the task it is in
/// and drops the rest.
void post_background_compile(std::function<void()> task,
                             CompileUrgency urgency = CompileUrgency::Needed);

/// Whether the caller is the background compile thread: a compile there has no
/// caller waiting for it.
bool on_background_compile_thread();

/// Whether a plan of `g` (a function's graph at another size) for arguments of
/// `types` may compile on the background thread while its calls run another
/// way: every argument's backend takes sizes at run time and compiles off the
/// caller's thread (a CUDA context does not), and g has no collective while
/// several ranks run (each rank's compile ends at its own time, and the calls
/// run meanwhile may communicate differently: every rank must run the same
/// collectives).
bool compiles_in_background(const Graph& g, std::span<const TensorType> types);

/// Held while a traced function runs its body eagerly because its plan is not
/// ready (a size seen once, or one compiling): improvements do not start while
/// one is held or within 2 ms after (calls back to back), so such a call does not
/// share the cores with a tier-up compile it has no use for (a needed compile
/// still runs: it is the call's own plan). At exit, or while a thread waits for
/// the queue (drain_background_compiles), improvements no longer wait.
class EagerCallScope {
 public:
  EagerCallScope();
  ~EagerCallScope();
  EagerCallScope(const EagerCallScope&) = delete;
  EagerCallScope& operator=(const EagerCallScope&) = delete;
};

/// Returns when no task is queued or running.
void drain_background_compiles();

}  // namespace kiln
