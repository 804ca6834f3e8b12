// Dynamic dimensions of a traced function: marked by the user, or found when
// a call changes only sizes; the probe that gives a marked function's first
// compile its kernel templates (codegen/kernel_template.h).
#include <algorithm>
#include <iostream>

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

std::string TracedCore::note_dynamic(const TraceArgs& args, const std::vector<TensorType>& types,
                                     const Entry& last) {
  if (!settings().auto_dynamic || types.size() != last.types.size() ||
      args.numbers.size() != last.numbers.size())
    return "";
  for (size_t i = 0; i < args.numbers.size(); ++i)
    if (args.numbers[i] != last.numbers[i]) return "";
  std::vector<DynamicDim> found;
  for (size_t t = 0, p = 0; t < types.size(); ++t, ++p) {
    while (!args.is_tensor[p]) ++p;
    const TensorType& now = types[t];
    const TensorType& was = last.types[t];
    if (now.dtype != was.dtype || now.device != was.device || now.shape.size() != was.shape.size())
      return "";
    for (size_t d = 0; d < now.shape.size(); ++d)
      if (now.shape[d] != was.shape[d]) found.push_back({p, t, int64_t(d), false});
  }
  std::string log;
  for (const DynamicDim& f : found) {
    const bool known = std::any_of(dynamic_.begin(), dynamic_.end(), [&](const DynamicDim& d) {
      return d.arg == f.arg && (d.dim == f.dim || d.dim + int64_t(types[f.tensor].shape.size()) == f.dim);
    });
    if (known) continue;
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

void TracedCore::probe(const TraceArgs& args, const std::vector<DynamicDim>& dims) {
  TraceArgs other = args;
  for (const DynamicDim& d : dims) {
    const Tensor& t = other.tensors[d.tensor];  // with the dims probed so far
    if (!t.device().is_cpu()) return;  // CUDA plans compile every size
    Shape shape = t.shape();
    int64_t& size = shape[size_t(normalize_dim(d.dim, int64_t(shape.size())))];
    size = size + 1;
    other.tensors[d.tensor] =
        empty(shape, TensorOptions().dtype(t.dtype()).device(t.device()).requires_grad(t.requires_grad()));
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
