// The loop of a kernel whose output may stream (streamed_loop.h).
#include "codegen/streamed_loop.h"

namespace kiln::kir {

std::optional<StreamedLoop> streamed_loop(const Kernel& k, int64_t min_bytes) {
  StreamedLoop s;
  bool nested = false;
  for (const Stmt& st : k.body)
    nested = nested || (st.kind != StmtKind::let && st.kind != StmtKind::store);
  if (!nested) {
    s.body = &k.body;
    s.var = 0;
  } else if (!k.body.empty() && k.body.back().kind == StmtKind::loop) {
    s.stmt = &k.body.back();
    s.body = &s.stmt->body;
    s.var = s.stmt->ref;
  } else {
    return std::nullopt;
  }
  s.lanes.assign(k.values.size(), Lanes::outside);
  const Stmt* store = nullptr;
  for (const Stmt& st : *s.body) {
    if (st.kind == StmtKind::store) {
      if (store) return std::nullopt;
      store = &st;
      continue;
    }
    if (st.kind != StmtKind::let) return std::nullopt;
    const ValueDef& d = k.values[size_t(st.value)];
    auto lanes_of = [&](int i) { return s.lanes[size_t(d.args[i])]; };
    auto invariant = [](Lanes l) { return l == Lanes::outside || l == Lanes::uniform; };
    Lanes l = Lanes::uniform;
    switch (d.op) {
      case ScalarOp::index:
        l = d.ref == s.var ? Lanes::linear : Lanes::uniform;
        break;
      case ScalarOp::load:
      case ScalarOp::table:
        if (lanes_of(0) == Lanes::linear && d.op == ScalarOp::load)
          l = Lanes::varying;
        else if (!invariant(lanes_of(0)))
          return std::nullopt;
        break;
      case ScalarOp::add: {
        const Lanes a = lanes_of(0), b = lanes_of(1);
        // The linear index's offset: defined before the loop, or a constant or parameter.
        auto offset = [&](int i) {
          const ValueDef& o = k.values[size_t(d.args[i])];
          return lanes_of(i) == Lanes::outside || o.op == ScalarOp::const_ ||
                 o.op == ScalarOp::param;
        };
        if ((a == Lanes::linear && offset(1)) || (b == Lanes::linear && offset(0))) {
          l = Lanes::linear;
          break;
        }
        [[fallthrough]];
      }
      default:
        for (int i = 0; i < scalar_op_arity(d.op); ++i) {
          if (lanes_of(i) == Lanes::linear) return std::nullopt;  // the index as data
          if (lanes_of(i) == Lanes::varying) l = Lanes::varying;
        }
        if (l == Lanes::varying &&
            (d.op == ScalarOp::sin || d.op == ScalarOp::cos || d.op == ScalarOp::philox ||
             d.op == ScalarOp::philox_below || d.op == ScalarOp::idiv || d.op == ScalarOp::imod ||
             (d.op == ScalarOp::pow && !is_floating(d.type))))
          return std::nullopt;  // scalar-only code (calls, integer loops)
    }
    s.lanes[size_t(st.value)] = l;
  }
  if (!store || s.lanes[size_t(store->index)] != Lanes::linear ||
      s.lanes[size_t(store->value)] == Lanes::linear)
    return std::nullopt;
  const Buffer& out = k.buffers[size_t(store->ref)];
  const int64_t elem = dtype_size(out.dtype);
  if (!out.output || out.alias >= 0 || (elem != 4 && elem != 8)) return std::nullopt;
  const int64_t bytes = out.numel() * elem;
  if (min_bytes > 0 && (out.sized_at_run_time || bytes < min_bytes)) return std::nullopt;
  for (const ValueDef& d : k.values)  // read back: its lines are in cache anyway
    if (d.op == ScalarOp::load && d.ref == store->ref) return std::nullopt;
  s.buffer = store->ref;
  return s;
}

}  // namespace kiln::kir
