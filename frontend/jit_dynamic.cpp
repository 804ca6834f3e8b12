// Dynamic dimensions of a traced function (codegen/dynamic_sizes.h): marked by
// the user, or found when a call changes only sizes; whether a new size compiles
// in the background while its calls run eagerly; and the probe that gives a
// marked function's first compile its kernel templates.
#include <algorithm>
#include <iostream>
#include <optional>

#include "codegen/compile_queue.h"
#include "codegen/dynamic_sizes.h"

#include "frontend/jit_entry.h"
#include "frontend/settings.h"

namespace kiln::detail {

void TracedCore::mark_dynamic(size_t arg, int64_t dim) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dynamic_->mark(arg, dim)) return;
  std::lock_guard<std::mutex> stats_lock(stats_->mu);
  stats_->stats.dynamic_dims.push_back("arg " + std::to_string(arg) + " dim " + std::to_string(dim));
}

std::string TracedCore::note_dynamic(const TraceArgs& args, const Signature& now,
                                     const Entry& last) {
  if (!settings().auto_dynamic) return "";
  const std::vector<TensorType>& types = now.types;
  const auto found =
      size_changes({args.is_tensor, types, args.numbers}, last.key.types, last.key.numbers);
  if (!found) return "";
  std::string log;
  for (const DynamicDim& f : dynamic_->add(*found, types)) {
    const std::string what = "arg " + std::to_string(f.arg) + " dim " + std::to_string(f.dim);
    {
      std::lock_guard<std::mutex> stats_lock(stats_->mu);
      stats_->stats.dynamic_dims.push_back(what);
    }
    log += "kiln: '" + name_ + "': " + what + " is now dynamic (" +
           std::to_string(last.key.types[f.tensor].shape[size_t(f.dim)]) + " -> " +
           std::to_string(types[f.tensor].shape[size_t(f.dim)]) +
           "): CPU kernels take it at run time; a new size retraces and shares them\n";
  }
  return log;
}

bool TracedCore::compile_in_background(const Signature& now, const TraceArgs& args,
                                       const Entry& last, bool newly_dynamic) const {
  const std::vector<TensorType>& types = now.types;
  if (!settings().background_compile || now.requires_grad != last.key.requires_grad ||
      now.grad_mode != last.key.grad_mode)
    return false;
  if (!compiles_in_background(last.traced.graph, types)) return false;
  const auto changes =
      size_changes({args.is_tensor, types, args.numbers}, last.key.types, last.key.numbers);
  if (!changes || changes->empty() || !dynamic_->all_dynamic(*changes, types)) return false;
  return newly_dynamic || std::any_of(entries_.begin(), entries_.end(),
                                      [](const auto& e) { return !e->background.ready(); });
}

void TracedCore::probe(const TraceArgs& args, const std::vector<TensorType>& types,
                       const std::vector<DynamicDim>& dims) {
  const std::optional<std::vector<TensorType>> at = probe_types(types, dims);
  if (!at) return;  // a backend that compiles every size
  TraceArgs other = args;
  for (const DynamicDim& d : dims) {
    const Tensor& t = args.tensors[d.tensor];
    Tensor probe =
        empty((*at)[d.tensor].shape,
              TensorOptions().dtype(t.dtype()).device(t.device()).requires_grad(t.requires_grad()));
    if (!t.is_leaf()) probe = probe.clone();  // computed by ops, as the call's tensor
    other.tensors[d.tensor] = probe;
  }
  // Whatever the body throws at the other size (a shape check of the user's, an
  // allocation) costs only the head start: the call itself goes on.
  try {
    (void)build(other, false, true, true);
  } catch (const std::exception& e) {
    if (log_enabled("recompiles"))
      std::cerr << "kiln: '" << name_ << "': no head start for its dynamic dimensions (tracing at "
                << "another size failed: " << e.what() << ")\n";
  }
}

}  // namespace kiln::detail

namespace kiln {

void wait_for_background_compiles() {
  drain_background_compiles();
}

}  // namespace kiln
