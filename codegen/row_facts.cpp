// Facts about a row-parallel kernel's values (see row_facts.h).
#include "codegen/row_facts.h"

namespace kiln::kir {
namespace {

// A load of buffer[row + index(var)], var the variable of loop `pass`.
struct RowElement {
  int32_t buffer = -1, var = -1;
  ValueId row = kNoValue;
  const Stmt* pass = nullptr;
};

const Stmt* loop_of(const std::vector<Stmt>& body, int32_t var) {
  for (const Stmt& st : body) {
    if (st.kind == StmtKind::loop && st.ref == var) return &st;
    if (const Stmt* in = loop_of(st.body, var)) return in;
  }
  return nullptr;
}

bool row_element(const Kernel& k, ValueId v, RowElement& e) {
  const ValueDef& d = k.values[size_t(v)];
  if (d.op != ScalarOp::load) return false;
  const ValueDef& idx = k.values[size_t(d.args[0])];
  if (idx.op != ScalarOp::add) return false;
  for (int i = 0; i < 2; ++i) {
    const ValueDef& var = k.values[size_t(idx.args[i])];
    if (var.op != ScalarOp::index || var.ref == 0) continue;
    e = {d.ref, var.ref, idx.args[1 - i], loop_of(k.body, var.ref)};
    return e.pass != nullptr && is_row_offset(k, e.row);
  }
  return false;
}

bool same_extent(const Stmt& a, const Stmt& b) {
  return a.extent == b.extent && a.extent_param == b.extent_param;
}

// The buffer whose memory `buffer`'s stores write (its alias's, when it has one).
int32_t base_buffer(const Kernel& k, int32_t buffer) {
  const int32_t alias = k.buffers[size_t(buffer)].alias;
  return alias >= 0 ? alias : buffer;
}

bool stored_to(const Kernel& k, const std::vector<Stmt>& body, int32_t base) {
  for (const Stmt& st : body)
    if ((st.kind == StmtKind::store && base_buffer(k, st.ref) == base) ||
        stored_to(k, st.body, base))
      return true;
  return false;
}

// Calls f(update, innermost enclosing loop or null) for every update of accumulator `acc`.
template <class F>
void for_each_update(const std::vector<Stmt>& body, const Stmt* loop, int32_t acc, F& f) {
  for (const Stmt& st : body) {
    if (st.kind == StmtKind::acc_update && st.ref == acc) f(st, loop);
    for_each_update(st.body, st.kind == StmtKind::loop ? &st : loop, acc, f);
  }
}

bool row_invariant(const Kernel& k, ValueId v, bool& reduced) {
  const ValueDef& d = k.values[size_t(v)];
  switch (d.op) {
    case ScalarOp::acc: {
      const Accumulator& a = k.accs[size_t(d.ref)];
      reduced = true;
      return !a.arg() && !a.ordered;
    }
    case ScalarOp::const_:
    case ScalarOp::param:
      return true;
    case ScalarOp::load:
    case ScalarOp::table:
    case ScalarOp::index:
    case ScalarOp::philox:
    case ScalarOp::philox_below:
      return false;
    default:
      for (ValueId a : d.args)
        if (a != kNoValue && !row_invariant(k, a, reduced)) return false;
      return true;
  }
}

}  // namespace

bool is_row_offset(const Kernel& k, ValueId v) {
  const ValueDef& d = k.values[size_t(v)];
  switch (d.op) {
    case ScalarOp::const_:
    case ScalarOp::param:
      return d.type == DType::i64;
    case ScalarOp::index:
      return d.ref == 0;
    case ScalarOp::add:
    case ScalarOp::sub:
    case ScalarOp::mul:
      return is_row_offset(k, d.args[0]) && is_row_offset(k, d.args[1]);
    default:
      return false;
  }
}

bool below_row_max(const Kernel& k, ValueId v) {
  const ValueDef& d = k.values[size_t(v)];
  if (d.op != ScalarOp::sub || !is_floating(d.type)) return false;
  const ValueDef& m = k.values[size_t(d.args[1])];
  if (m.op != ScalarOp::acc) return false;
  const Accumulator& a = k.accs[size_t(m.ref)];
  if (a.arg() || a.ordered || combine_of(a.op) != ScalarOp::max) return false;
  RowElement x;
  if (!row_element(k, d.args[0], x) || stored_to(k, k.body, base_buffer(k, x.buffer))) return false;
  int updates = 0;
  bool same_row = true;
  auto check = [&](const Stmt& update, const Stmt* pass) {
    RowElement e;
    ++updates;
    same_row = same_row && pass && row_element(k, update.value, e) && e.buffer == x.buffer &&
               e.row == x.row && e.var == pass->ref && same_extent(*pass, *x.pass);
  };
  for_each_update(k.body, nullptr, m.ref, check);
  return updates > 0 && same_row;
}

bool row_invariant(const Kernel& k, ValueId v) {
  bool reduced = false;
  return row_invariant(k, v, reduced) && reduced;
}

}  // namespace kiln::kir
