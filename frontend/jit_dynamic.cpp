// Dynamic dimensions of a traced function: marked by the user, or found when
// a call changes only sizes; whether a new size compiles in the background
// (codegen/compile_queue.h) while its calls run eagerly; and the probe that
// gives a marked function's first compile its kernel templates
// (codegen/kernel_template.h).
#include <algorithm>
#include <iostream>
#include <optional>

#include "codegen/compile_queue.h"
#include "runtime/collective.h"

#include "frontend/jit_entry.h"
#include "frontend/settings.h"

namespace kiln::detail {

void TracedCore::mark_dynamic(size_t arg, int64_t dim) {
  std::lock_guard<std::mutex> lock(mu_);
  for (DynamicDim& d : dynamic_)
    if (d.arg == arg && d.dim == dim) {
      d.marked = true;
      return;
    }
  dynamic_.push_back({arg, 0, dim, true});  // `tensor` is set at the next call
  std::lock_guard<std::mutex> stats_lock(stats_->mu);
  stats_->stats.dynamic_dims.push_back("arg " + std::to_string(arg) + " dim " + std::to_string(dim));
}

void TracedCore::check_marked(const TraceArgs& args, const std::vector<TensorType>& types) {
  for (DynamicDim& d : dynamic_) {
    if (!d.marked) continue;
    size_t t = 0;
    for (size_t p = 0; p < d.arg && p < args.is_tensor.size(); ++p) t += args.is_tensor[p];
    d.tensor = t;
    const int64_t rank = t < types.size() ? int64_t(types[t].shape.size()) : 0;
    if (t >= types.size() || d.dim < -rank || d.dim >= rank)
      throw Error("traced function '" + name_ + "': mark_dynamic(arg " + std::to_string(d.arg) +
                      ", dim " + std::to_string(d.dim) + ") does not fit this call (arg " +
                      std::to_string(d.arg) + " is " + (t < types.size() ? types[t].str() : "missing") + ")",
                  where_);
  }
}

std::optional<std::vector<TracedCore::DynamicDim>> TracedCore::size_changes(
    const TraceArgs& args, const std::vector<TensorType>& types, const Entry& last) {
  if (types.size() != last.types.size() || args.numbers != last.numbers) return std::nullopt;
  std::vector<DynamicDim> found;
  for (size_t t = 0, p = 0; t < types.size(); ++t, ++p) {
    while (!args.is_tensor[p]) ++p;
    const TensorType& now = types[t];
    const TensorType& was = last.types[t];
    if (now.dtype != was.dtype || now.device != was.device || now.shape.size() != was.shape.size())
      return std::nullopt;
    for (size_t d = 0; d < now.shape.size(); ++d)
      if (now.shape[d] != was.shape[d]) found.push_back({p, t, int64_t(d), false});
  }
  return found;
}

std::string TracedCore::note_dynamic(const TraceArgs& args, const std::vector<TensorType>& types,
                                     const Entry& last) {
  if (!settings().auto_dynamic) return "";
  const std::optional<std::vector<DynamicDim>> found = size_changes(args, types, last);
  if (!found) return "";
  std::string log;
  for (const DynamicDim& f : *found) {
    if (is_dynamic(f.arg, f.dim, int64_t(types[f.tensor].shape.size()))) continue;
    dynamic_.push_back(f);
    const std::string what = "arg " + std::to_string(f.arg) + " dim " + std::to_string(f.dim);
    {
      std::lock_guard<std::mutex> stats_lock(stats_->mu);
      stats_->stats.dynamic_dims.push_back(what);
    }
    log += "kiln: '" + name_ + "': " + what + " is now dynamic (" +
           std::to_string(last.types[f.tensor].shape[size_t(f.dim)]) + " -> " +
           std::to_string(types[f.tensor].shape[size_t(f.dim)]) +
           "): CPU kernels take it at run time; a new size retraces and shares them\n";
  }
  return log;
}

bool TracedCore::is_dynamic(size_t arg, int64_t dim, int64_t rank) const {
  return std::any_of(dynamic_.begin(), dynamic_.end(),
                     [&](const DynamicDim& d) { return d.arg == arg && (d.dim == dim || d.dim + rank == dim); });
}

bool TracedCore::compile_in_background(const std::vector<TensorType>& types, const std::vector<uint8_t>& rg,
                                       const TraceArgs& args, bool grad_mode, const Entry& last,
                                       bool newly_dynamic) const {
  if (!settings().background_compile || rg != last.requires_grad || grad_mode != last.grad_mode)
    return false;
  // A plan and the body run eagerly may communicate differently (the plan
  // packs gradients into buckets), and each rank's compile ends at its own
  // time: a function with collectives compiles each size before its call, so
  // that every rank runs the same collectives.
  if (collectives::started() && collectives::world_size() > 1 &&
      std::any_of(last.traced.graph.nodes().begin(), last.traced.graph.nodes().end(),
                  [](const Node& n) { return op_info(n.op).category == OpCategory::Collective; }))
    return false;
  // CUDA plans compile every size, and a CUDA compile wants the caller's context.
  if (!std::all_of(types.begin(), types.end(), [](const TensorType& t) { return t.device.is_cpu(); }))
    return false;
  const std::optional<std::vector<DynamicDim>> changes = size_changes(args, types, last);
  if (!changes || changes->empty()) return false;
  for (const DynamicDim& c : *changes)
    if (!is_dynamic(c.arg, c.dim, int64_t(types[c.tensor].shape.size()))) return false;
  return newly_dynamic ||
         std::any_of(entries_.begin(), entries_.end(), [](const auto& e) { return !e->ready.load(); });
}

void TracedCore::probe(const TraceArgs& args, const std::vector<DynamicDim>& dims) {
  TraceArgs other = args;
  for (const DynamicDim& d : dims) {
    const Tensor& t = other.tensors[d.tensor];  // with the dims probed so far
    if (!t.device().is_cpu()) return;  // CUDA plans compile every size
    Shape shape = t.shape();
    int64_t& size = shape[size_t(normalize_dim(d.dim, int64_t(shape.size())))];
    size = size + 1;
    Tensor probe = empty(shape, TensorOptions().dtype(t.dtype()).device(t.device()).requires_grad(t.requires_grad()));
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
