// Which of a kernel's outputs can be stored over its inputs, and storing them
// there (lower.h: overwritable, store_in_place, reads_only_where_written): read
// off the kernel that lowering writes.
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

namespace {

// Whether k may store output buffer `ob` over input buffer `ib`.
bool may_overwrite(const kir::Kernel& k, int32_t ob, int32_t ib) {
  const kir::Buffer& o = k.buffers[size_t(ob)];
  const kir::Buffer& i = k.buffers[size_t(ib)];
  return o.dtype == i.dtype && o.numel() == i.numel() && reads_only_where_written(k, ob, ib);
}

}  // namespace

std::vector<std::pair<Value, Value>> overwritable(const FusionGroup& group, const kir::Kernel& k) {
  std::vector<std::pair<Value, Value>> out;
  if (group.kind != GroupKind::Elementwise && group.kind != GroupKind::Matmul) return out;
  for (size_t ob = 0; ob < k.buffers.size(); ++ob) {
    if (!k.buffers[ob].output || k.buffers[ob].alias >= 0) continue;
    for (size_t ib = 0; ib < k.buffers.size(); ++ib)
      if (!k.buffers[ib].output && may_overwrite(k, int32_t(ob), int32_t(ib)))
        out.push_back({k.buffers[ob].value, k.buffers[ib].value});
  }
  return out;
}

void store_in_place(kir::Kernel& k, const std::vector<std::pair<Value, Value>>& pairs) {
  for (const auto& [out_v, in_v] : pairs) {
    const int32_t ob = buffer_of(k, out_v, true), ib = buffer_of(k, in_v, false);
    if (ob < 0 || ib < 0 || !may_overwrite(k, ob, ib))
      throw Error("internal: kernel " + k.name + " cannot store %" + std::to_string(out_v.node) +
                  " over %" + std::to_string(in_v.node) +
                  " (not an output and an input it reads only where it writes)");
    k.buffers[size_t(ob)].alias = ib;
  }
}

}  // namespace kiln
