// The background compile queue: one thread compiles plans while the calls that
// need them run another way meanwhile (a traced function's new size of a
// dynamic dimension runs its body eagerly until its plan is ready).
#pragma once

#include <functional>
#include <span>

#include "ir/graph.h"

namespace kiln {

/// Runs `task` on the background compile thread. Tasks run one at a time, in
/// the order posted, so that a later size finds the kernel templates an earlier
/// one made; each compiles serially (SerialScope), leaving the thread pool to
/// the calls running meanwhile. A task keeps its own errors (it must not throw).
/// When the main thread exits the process, the queue runs what it holds to the
/// end before any static is destroyed (so optimised kernels reach the disk cache)
/// and takes no more; an exit from another thread finishes the task it is in
/// and drops the rest.
void post_background_compile(std::function<void()> task);

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

/// Returns when no task is queued or running.
void drain_background_compiles();

}  // namespace kiln
