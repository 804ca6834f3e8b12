// Dynamic dimensions of a compiled function's arguments (dynamic_sizes.h).
#include "codegen/dynamic_sizes.h"

#include <algorithm>

#include "codegen/backend.h"

namespace kiln {

std::optional<std::vector<DynamicDim>> size_changes(const SizedCall& now,
                                                    const std::vector<TensorType>& types,
                                                    const std::vector<double>& numbers) {
  if (now.types.size() != types.size() || now.numbers != numbers) return std::nullopt;
  std::vector<DynamicDim> found;
  for (size_t t = 0, p = 0; t < types.size(); ++t, ++p) {
    while (!now.is_tensor[p]) ++p;
    const TensorType& is = now.types[t];
    const TensorType& was = types[t];
    if (is.dtype != was.dtype || is.device != was.device || is.shape.size() != was.shape.size())
      return std::nullopt;
    for (size_t d = 0; d < is.shape.size(); ++d)
      if (is.shape[d] != was.shape[d]) found.push_back({p, t, int64_t(d), false});
  }
  return found;
}

std::optional<std::vector<TensorType>> probe_types(const std::vector<TensorType>& types,
                                                   const std::vector<DynamicDim>& dims) {
  std::vector<TensorType> other = types;
  for (const DynamicDim& d : dims) {
    TensorType& t = other[d.tensor];  // with the dims probed so far
    if (!backend_for(t.device).sizes_at_run_time()) return std::nullopt;
    t.shape[size_t(normalize_dim(d.dim, int64_t(t.shape.size())))] += 1;
  }
  return other;
}

std::string DynamicDim::str() const {
  return "arg " + std::to_string(arg) + " dim " + std::to_string(dim);
}

std::string now_dynamic_str(const DynamicDim& d, const std::vector<TensorType>& was,
                            const std::vector<TensorType>& now) {
  return d.str() + " is now dynamic (" + std::to_string(was[d.tensor].shape[size_t(d.dim)]) +
         " -> " + std::to_string(now[d.tensor].shape[size_t(d.dim)]) +
         "): CPU kernels take it at run time; a new size retraces and shares them";
}

bool DynamicDims::mark(size_t arg, int64_t dim, const std::vector<bool>& is_tensor,
                       const std::string& what) {
  if (arg >= is_tensor.size() || !is_tensor[arg])
    throw Error("mark_dynamic(arg " + std::to_string(arg) + ", dim " + std::to_string(dim) +
                ") on " + what +
                ": expected the position of a tensor argument (the function takes " +
                std::to_string(is_tensor.size()) + " arguments)");
  for (DynamicDim& d : dims_)
    if (d.arg == arg && d.dim == dim) {
      d.marked = true;
      return false;
    }
  dims_.push_back({arg, 0, dim, true});  // `tensor` is set at the next call
  return true;
}

void DynamicDims::fit_marked(const std::vector<bool>& is_tensor,
                             const std::vector<TensorType>& types, const std::string& what,
                             SourceLoc where) {
  for (DynamicDim& d : dims_) {
    if (!d.marked) continue;
    size_t t = 0;
    for (size_t p = 0; p < d.arg && p < is_tensor.size(); ++p) t += is_tensor[p];
    d.tensor = t;
    const int64_t rank = t < types.size() ? int64_t(types[t].shape.size()) : 0;
    if (t >= types.size() || d.dim < -rank || d.dim >= rank)
      throw Error(what + ": mark_dynamic(arg " + std::to_string(d.arg) + ", dim " +
                      std::to_string(d.dim) + ") does not fit this call (arg " +
                      std::to_string(d.arg) + " is " +
                      (t < types.size() ? types[t].str() : "missing") + ")",
                  where);
  }
}

std::vector<DynamicDim> DynamicDims::add(const std::vector<DynamicDim>& changes,
                                         const std::vector<TensorType>& types) {
  std::vector<DynamicDim> added;
  for (const DynamicDim& c : changes) {
    if (is_dynamic(c.arg, c.dim, int64_t(types[c.tensor].shape.size()))) continue;
    dims_.push_back(c);
    added.push_back(c);
  }
  return added;
}

bool DynamicDims::all_dynamic(const std::vector<DynamicDim>& changes,
                              const std::vector<TensorType>& types) const {
  return std::all_of(changes.begin(), changes.end(), [&](const DynamicDim& c) {
    return is_dynamic(c.arg, c.dim, int64_t(types[c.tensor].shape.size()));
  });
}

std::vector<DynamicDim> DynamicDims::take_probe() {
  std::vector<DynamicDim> marked;
  if (probed_) return marked;
  for (const DynamicDim& d : dims_)
    if (d.marked) marked.push_back(d);
  probed_ = !marked.empty();
  return marked;
}

bool DynamicDims::is_dynamic(size_t arg, int64_t dim, int64_t rank) const {
  return std::any_of(dims_.begin(), dims_.end(), [&](const DynamicDim& d) {
    return d.arg == arg && (d.dim == dim || d.dim + rank == dim);
  });
}

}  // namespace kiln
