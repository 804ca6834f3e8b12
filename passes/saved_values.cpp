// The saved values of a trace and the writes into their storages (saved_values.h).
#include "passes/saved_values.h"

#include "passes/grad_analysis.h"

namespace kiln {

uint64_t SavedValues::writes(const void* s) const {
  auto it = writes_.find(s);
  return it == writes_.end() ? 0 : it->second;
}

void SavedValues::record(NodeId id, const std::vector<Storage>& operands, Storage result,
                         std::vector<bool> needs) {
  if (ops_.size() <= id) ops_.resize(id + 1);
  Op& op = ops_[id];
  for (size_t i = 0; i < operands.size(); ++i)
    op.refs.push_back(Ref{operands[i], writes(operands[i].get()), static_cast<int64_t>(i)});
  const uint64_t w = writes(result.get());
  op.refs.push_back(Ref{std::move(result), w, -1});
  op.needs = std::move(needs);
}

void SavedValues::keep_overwritten(NodeId id, const void* s) {
  if (id >= ops_.size()) return;
  const uint64_t now = writes(s);
  // Only `self`, operand 0, and only for this op (autograd.cpp's keep_overwritten).
  for (Ref& r : ops_[id].refs)
    if (r.which == 0 && r.storage.get() == s && r.writes == now) r.kept = true;
}

std::vector<std::pair<NodeId, const SavedValues::Ref*>> SavedValues::reads(
    const Graph& g, std::span<const Value> roots, bool stale) const {
  std::vector<SavedValue> values;  // the saved values as grad_analysis.h sees them
  std::vector<std::pair<NodeId, const Ref*>> refs;
  for (NodeId id = 0; id < ops_.size(); ++id)
    for (const Ref& r : ops_[id].refs)
      if (!r.kept && (writes(r.storage.get()) != r.writes) == stale) {
        values.push_back({id, r.which, ops_[id].needs});
        refs.emplace_back(id, &r);
      }
  std::vector<std::pair<NodeId, const Ref*>> out;
  for (size_t k : saved_values_read(g, roots, values)) out.push_back(refs[k]);
  return out;
}

SavedValues::Stale SavedValues::first_stale(const Graph& g, std::span<const Value> roots) const {
  const auto read = reads(g, roots, /*stale=*/true);
  if (read.empty()) return {};
  const auto& [id, r] = read.front();
  return Stale{id, r->writes, writes(r->storage.get())};
}

}  // namespace kiln
