// Whether a group's outputs can be stored over its inputs (lower.h,
// in_place_allowed, reads_only_where_written): read off the kernel that
// lowering writes.
#include <algorithm>

#include "codegen/lower.h"

namespace kiln {

namespace {

int32_t buffer_of(const kir::Kernel& k, Value v, bool output) {
  for (size_t i = 0; i < k.buffers.size(); ++i)
    if (k.buffers[i].value == v && k.buffers[i].output == output) return int32_t(i);
  return -1;
}

// The indices of every store to buffer `b`, in program order.
void store_indices(const std::vector<kir::Stmt>& body, int32_t b, std::vector<kir::ValueId>* out) {
  for (const kir::Stmt& s : body) {
    if (s.kind == kir::StmtKind::store && s.ref == b) out->push_back(s.index);
    store_indices(s.body, b, out);
  }
}

}  // namespace

bool reads_only_where_written(const kir::Kernel& k, int32_t out, int32_t in) {
  // Index values are hash-consed: one store index, and every load of the input
  // at exactly that value, means each element is read where it is written.
  std::vector<kir::ValueId> stores;
  store_indices(k.body, out, &stores);
  if (stores.size() != 1) return false;
  for (const kir::ValueDef& d : k.values)
    if (d.op == kir::ScalarOp::load && d.ref == in && d.args[0] != stores[0]) return false;
  return true;
}

bool in_place_allowed(const Graph& g, const FusionGroup& group,
                      const std::vector<std::pair<Value, Value>>& pairs) {
  if (group.kind != GroupKind::Elementwise && group.kind != GroupKind::Matmul) return false;
  const kir::Kernel k = lower_group(g, group);
  for (const auto& [out_v, in_v] : pairs) {
    const int32_t ob = buffer_of(k, out_v, true), ib = buffer_of(k, in_v, false);
    if (ob < 0 || ib < 0) return false;
    if (k.buffers[ob].dtype != k.buffers[ib].dtype || k.buffers[ob].numel() != k.buffers[ib].numel())
      return false;
    if (!reads_only_where_written(k, ob, ib)) return false;
  }
  return true;
}

}  // namespace kiln
