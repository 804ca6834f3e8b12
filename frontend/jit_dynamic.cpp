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

void TracedCore::mark_dynamic(size_t arg, int64_t dim, const std::vector<bool>& is_tensor) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dynamic_->mark(arg, dim, is_tensor, "'" + name_ + "'")) return;
  std::lock_guard<std::mutex> stats_lock(stats_->mu);
  stats_->stats.dynamic_dims.push_back(DynamicDim{arg, 0, dim}.str());
}

std::string TracedCore::note_dynamic(const Signature& now, const Entry& last, bool* background) {
  const std::vector<TensorType>& types = now.types;
  const auto changes =
      size_changes({now.is_tensor, types, now.numbers}, last.key.types, last.key.numbers);
  std::vector<DynamicDim> added;
  if (changes && settings().auto_dynamic) added = dynamic_->add(*changes, types);
  std::string log;
  for (const DynamicDim& f : added) {
    {
      std::lock_guard<std::mutex> stats_lock(stats_->mu);
      stats_->stats.dynamic_dims.push_back(f.str());
    }
    log += "kiln: '" + name_ + "': " + now_dynamic_str(f, last.key.types, types) + "\n";
  }
  *background =
      settings().background_compile && changes && !changes->empty() &&
      now.requires_grad == last.key.requires_grad && now.grad_mode == last.key.grad_mode &&
      dynamic_->all_dynamic(*changes, types) && compiles_in_background(last.traced.graph, types) &&
      (!added.empty() || !templates_started_ ||
       std::any_of(entries_.begin(), entries_.end(),
                   [](const auto& e) { return !e->background.ready(); }));
  return log;
}

bool TracedCore::compiles_now(const Signature& sig) {
  const int after = settings().compile_after;
  if (after <= 0) return true;
  auto seen = std::ranges::find_if(eager_sizes_, [&](const auto& s) { return s.first == sig; });
  if (seen == eager_sizes_.end()) {
    if (eager_sizes_.size() >= 4 * cache_size_) eager_sizes_.erase(eager_sizes_.begin());
    eager_sizes_.emplace_back(sig, 0);
    seen = eager_sizes_.end() - 1;
  }
  if (seen->second < after) {
    seen->second++;
    return false;
  }
  eager_sizes_.erase(seen);
  return true;
}

void TracedCore::probe(const Signature& sig, const std::vector<DynamicDim>& dims) {
  std::optional<std::vector<TensorType>> at = probe_types(sig.types, dims);
  if (!at) return;  // a backend that compiles every size
  Signature other = sig;
  other.types = std::move(*at);
  // Whatever the body throws at the other size (a shape check of the user's, an
  // allocation) costs only the head start: the call itself goes on.
  try {
    // Its kernels are only lowered and remembered: the entry gets no plan.
    const std::unique_ptr<Entry> e = trace(other);
    record_program_kernels(e->traced.graph, e->traced.backward.get(), entry_options(false, true));
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
