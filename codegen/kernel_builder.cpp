// KernelBuilder: statements, hash-consing, index folds and dead-value removal.
#include "codegen/kernel_builder.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "ir/error.h"

namespace kiln::kir {

namespace {

std::string cse_key(const ValueDef& d) {
  std::string key(sizeof(ValueDef), '\0');
  // Field by field so padding never enters the key.
  char* p = key.data();
  auto put = [&](const auto& x) {
    std::memcpy(p, &x, sizeof(x));
    p += sizeof(x);
  };
  put(d.op);
  put(d.type);
  put(d.args);
  put(d.fimm);
  put(d.iimm);
  put(d.ref);
  key.resize(size_t(p - key.data()));
  return key;
}

}  // namespace

KernelBuilder::KernelBuilder(std::string name) {
  k_.name = std::move(name);
  blocks_.push_back(&k_.body);
  scopes_.emplace_back();
}

namespace {

// Marks values reachable from statements that have effects (stores, accumulator
// updates, conditions), then drops the other lets and renumbers.
void mark_used(const Kernel& k, const std::vector<Stmt>& body, std::vector<char>& used) {
  std::vector<ValueId> work;
  auto need = [&](ValueId v) {
    if (v >= 0 && !used[v]) {
      used[v] = 1;
      work.push_back(v);
    }
  };
  for (const Stmt& s : body) {
    switch (s.kind) {
      case StmtKind::store:
        need(s.index);
        need(s.value);
        break;
      case StmtKind::acc_update:
        need(s.value);
        need(s.index);
        break;
      case StmtKind::if_:
        need(s.value);
        break;
      default:
        break;
    }
    if (!s.body.empty()) mark_used(k, s.body, used);
  }
  while (!work.empty()) {
    const ValueId v = work.back();
    work.pop_back();
    for (ValueId a : k.values[v].args) need(a);
  }
}

void drop_unused(std::vector<Stmt>& body, const std::vector<char>& used,
                 const std::vector<ValueId>& renum) {
  std::vector<Stmt> kept;
  for (Stmt& s : body) {
    if (s.kind == StmtKind::let && !used[s.value]) continue;
    auto re = [&](ValueId& v) {
      if (v >= 0) v = renum[v];
    };
    re(s.value);
    re(s.index);
    drop_unused(s.body, used, renum);
    kept.push_back(std::move(s));
  }
  body = std::move(kept);
}

}  // namespace

Kernel KernelBuilder::take() {
  KILN_CHECK(blocks_.size() == 1, "kernel builder: ", blocks_.size() - 1, " block(s) left open");
  Kernel out = std::move(k_);
  k_ = Kernel{};
  upper_.clear();
  range_.clear();
  range_done_.clear();
  blocks_ = {&k_.body};
  scopes_.assign(1, Scope{});
  // Used values are a fixpoint over operands, which are always defined earlier.
  std::vector<char> used(out.values.size(), 0);
  mark_used(out, out.body, used);
  std::vector<ValueId> renum(out.values.size(), kNoValue);
  std::vector<ValueDef> values;
  for (size_t v = 0; v < out.values.size(); ++v) {
    if (!used[v]) continue;
    renum[v] = ValueId(values.size());
    ValueDef d = out.values[v];
    for (ValueId& a : d.args)
      if (a >= 0) a = renum[a];
    values.push_back(d);
  }
  out.values = std::move(values);
  drop_unused(out.body, used, renum);
  return out;
}

int32_t KernelBuilder::add_buffer(Buffer b) {
  b.name = "buf" + std::to_string(k_.buffers.size());
  k_.buffers.push_back(std::move(b));
  return int32_t(k_.buffers.size() - 1);
}

int32_t KernelBuilder::add_table(Table t) {
  k_.tables.push_back(std::move(t));
  return int32_t(k_.tables.size() - 1);
}

int32_t KernelBuilder::add_accumulator(OpKind op, DType type, bool ordered) {
  k_.accs.push_back({op, type, ordered});
  return int32_t(k_.accs.size() - 1);
}

double KernelBuilder::const_value(ValueId v) const {
  const ValueDef& d = def(v);
  return is_floating(d.type) ? d.fimm : double(d.iimm);
}

ValueId KernelBuilder::add_value(const ValueDef& d) {
  const std::string key = cse_key(d);
  for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
    auto it = s->cse.find(key);
    if (it != s->cse.end()) return it->second;
  }
  k_.values.push_back(d);
  const ValueId id = ValueId(k_.values.size() - 1);
  upper_.push_back(-1);
  range_.emplace_back();
  range_done_.push_back(0);
  scopes_.back().cse.emplace(key, id);
  Stmt s;
  s.kind = StmtKind::let;
  s.value = id;
  push_stmt(std::move(s));
  return id;
}

namespace {
// An integer as a value of integer type t (wrapping, as a store of it would).
int64_t wrap_int(int64_t v, DType t) {
  switch (t) {
    case DType::i32:
      return int32_t(v);
    case DType::i16:
      return int16_t(v);
    case DType::i8:
      return int8_t(v);
    case DType::u8:
      return uint8_t(v);
    default:
      return v;
  }
}
}  // namespace

ValueId KernelBuilder::constant(DType t, double v) {
  ValueDef d;
  d.op = ScalarOp::const_;
  d.type = t;
  if (is_floating(t)) {
    d.fimm = t == DType::f32 ? double(float(v)) : v;
  } else if (t == DType::b8) {
    d.iimm = v != 0;
  } else {
    d.iimm = wrap_int(int64_t(v), t);
  }
  return add_value(d);
}

ValueId KernelBuilder::iconst(int64_t v, DType t) {
  KILN_CHECK(!is_floating(t), "kernel builder: iconst of a floating type");
  ValueDef d;
  d.op = ScalarOp::const_;
  d.type = t;
  d.iimm = t == DType::b8 ? (v != 0) : wrap_int(v, t);
  return add_value(d);
}

ValueId KernelBuilder::index(int32_t loop) {
  ValueDef d;
  d.op = ScalarOp::index;
  d.type = DType::i64;
  d.ref = loop;
  return add_value(d);
}

ValueId KernelBuilder::load(int32_t buffer, ValueId idx) {
  ValueDef d;
  d.op = ScalarOp::load;
  d.type = k_.buffers.at(buffer).dtype;
  d.args[0] = idx;
  d.ref = buffer;
  return add_value(d);
}

ValueId KernelBuilder::load_table(int32_t table, ValueId idx) {
  ValueDef d;
  d.op = ScalarOp::table;
  d.type = k_.tables.at(table).dtype;
  d.args[0] = idx;
  d.ref = table;
  return add_value(d);
}

ValueId KernelBuilder::acc_value(int32_t acc) {
  const Accumulator& a = k_.accs.at(acc);
  ValueDef d;
  d.op = ScalarOp::acc;
  d.type = a.arg() ? DType::i64 : a.type;
  d.ref = acc;
  return add_value(d);
}

ValueId KernelBuilder::cast(ValueId x, DType to) {
  if (type(x) == to) return x;
  if (is_const(x)) {
    const ValueDef& c = def(x);
    if (to == DType::b8) return iconst(is_floating(c.type) ? c.fimm != 0 : c.iimm != 0, to);
    if (is_floating(to)) return constant(to, const_value(x));
    if (!is_floating(c.type)) return iconst(c.iimm, to);
  }
  ValueDef d;
  d.op = ScalarOp::cast;
  d.type = to;
  d.args[0] = x;
  return add_value(d);
}

ValueId KernelBuilder::unary(ScalarOp op, ValueId x) {
  ValueDef d;
  d.op = op;
  d.type = type(x);
  d.args[0] = x;
  if (op == ScalarOp::not_ && is_const(x)) return iconst(def(x).iimm == 0, DType::b8);
  return add_value(d);
}

ValueId KernelBuilder::fold_binary(ScalarOp op, ValueId a, ValueId b) {
  const DType t = type(a);
  // Every integer type (constants hold their values wrapped to it, iconst).
  const bool integer = is_integral(t) && t != DType::b8;
  if (integer && is_const(a) && is_const(b)) {
    const int64_t x = def(a).iimm, y = def(b).iimm;
    switch (op) {
      case ScalarOp::add:
        return iconst(int64_t(uint64_t(x) + uint64_t(y)), t);
      case ScalarOp::sub:
        return iconst(int64_t(uint64_t(x) - uint64_t(y)), t);
      case ScalarOp::mul:
        return iconst(int64_t(uint64_t(x) * uint64_t(y)), t);
      case ScalarOp::idiv:
        if (y > 0 && x >= 0) return iconst(x / y, t);
        break;
      case ScalarOp::imod:
        if (y > 0 && x >= 0) return iconst(x % y, t);
        break;
      case ScalarOp::eq:
        return iconst(x == y, DType::b8);
      case ScalarOp::ne:
        return iconst(x != y, DType::b8);
      case ScalarOp::lt:
        return iconst(x < y, DType::b8);
      case ScalarOp::le:
        return iconst(x <= y, DType::b8);
      case ScalarOp::gt:
        return iconst(x > y, DType::b8);
      case ScalarOp::ge:
        return iconst(x >= y, DType::b8);
      default:
        break;
    }
  }
  auto is = [&](ValueId v, int64_t c) {
    return is_const(v) && !is_floating(t) && def(v).iimm == c;
  };
  if (integer) {
    switch (op) {
      case ScalarOp::add:
        if (is(a, 0)) return b;
        if (is(b, 0)) return a;
        break;
      case ScalarOp::sub:
        if (is(b, 0)) return a;
        // (x + c1) - c2 = x + (c1 - c2): a pad's position inside a row cut at its edges.
        if (t == DType::i64 && is_const(b) && is_op(a, ScalarOp::add))
          for (int o = 0; o < 2; ++o)
            if (is_const(def(a).args[o]))
              return binary(ScalarOp::add, def(a).args[1 - o],
                            iconst(def(def(a).args[o]).iimm - def(b).iimm));
        break;
      case ScalarOp::mul:
        if (is(a, 1)) return b;
        if (is(b, 1)) return a;
        if (is(a, 0) || is(b, 0)) return iconst(0, t);
        break;
      case ScalarOp::idiv:
        if (is(b, 1)) return a;
        break;
      case ScalarOp::imod:
        if (is(b, 1)) return iconst(0, t);
        break;
      default:
        break;
    }
  }
  if (t == DType::b8) {
    if (op == ScalarOp::and_) {
      if (is(a, 1)) return b;
      if (is(b, 1)) return a;
      if (is(a, 0) || is(b, 0)) return iconst(0, DType::b8);
    }
    if (op == ScalarOp::or_) {
      if (is(a, 0)) return b;
      if (is(b, 0)) return a;
      if (is(a, 1) || is(b, 1)) return iconst(1, DType::b8);
    }
  }
  // x * 1 is exact in IEEE arithmetic too.
  if (is_floating(t) && op == ScalarOp::mul) {
    if (is_const(b) && def(b).fimm == 1.0) return a;
    if (is_const(a) && def(a).fimm == 1.0) return b;
  }
  return kNoValue;
}

ValueId KernelBuilder::fold_index(ScalarOp op, ValueId a, ValueId b) {
  if (type(a) != DType::i64) return kNoValue;
  const bool b_pos = is_const(b) && def(b).iimm > 0;
  switch (op) {
    case ScalarOp::mul:
      if (upper_bound(a) == 1 || upper_bound(b) == 1) return iconst(0);
      break;
    case ScalarOp::idiv:
    case ScalarOp::imod: {
      if (!b_pos) break;
      const int64_t c = def(b).iimm;
      const int64_t ua = upper_bound(a);
      if (ua >= 0 && ua <= c) return op == ScalarOp::idiv ? iconst(0) : a;
      // x*k + y with 0 <= y < k and c = k*m: (x*k + y) / c = x / m and
      // (x*k + y) % c = (x % m)*k + y. With m = 1 that takes linearised coordinates
      // apart again; with m > 1 a row index divides once per row, not per element.
      // x*k alone is y = 0 (a row's first position).
      const bool sum = is_op(a, ScalarOp::add);
      if (sum || is_op(a, ScalarOp::mul)) {
        for (int order = 0; order < (sum ? 2 : 1); ++order) {
          const ValueId m = sum ? def(a).args[order] : a;
          const ValueId r = sum ? def(a).args[1 - order] : kNoValue;  // y; none: 0
          if (!is_op(m, ScalarOp::mul)) continue;
          const int64_t ur = r == kNoValue ? 1 : upper_bound(r);
          auto plus_y = [&](ValueId v, ValueId y) {
            return y == kNoValue ? v : binary(ScalarOp::add, v, y);
          };
          for (int mo = 0; mo < 2; ++mo) {
            const ValueId f = def(m).args[mo], k = def(m).args[1 - mo];
            if (!is_const(k)) continue;
            const int64_t kv = def(k).iimm;
            if (kv <= 0 || ur < 0) continue;
            // k = m*c, y >= 0 and x*k + y >= 0 (so truncation is floor):
            // (x*k + y) / c = x*m + y / c and (x*k + y) % c = y % c. A transposed
            // read (a weight gradient's patches) whose row index then divides
            // once per row.
            if (kv % c == 0 && ua >= 0) {
              if (op == ScalarOp::imod)
                return r == kNoValue ? iconst(0) : binary(ScalarOp::imod, r, b);
              return plus_y(binary(ScalarOp::mul, f, iconst(kv / c)),
                            r == kNoValue ? kNoValue : binary(ScalarOp::idiv, r, b));
            }
            if (c % kv != 0 || ur > kv) continue;
            const ValueId q = iconst(c / kv);
            if (op == ScalarOp::idiv) return binary(ScalarOp::idiv, f, q);
            return plus_y(binary(ScalarOp::mul, binary(ScalarOp::imod, f, q), k), r);
          }
        }
      }
      break;
    }
    case ScalarOp::add: {
      // A value whose only possible value is 0.
      if (upper_bound(a) == 1) return b;
      if (upper_bound(b) == 1) return a;
      // (x / c) * c + x % c == x
      for (int order = 0; order < 2; ++order) {
        const ValueId m = order ? b : a, r = order ? a : b;
        if (!is_op(m, ScalarOp::mul) || !is_op(r, ScalarOp::imod)) continue;
        const ValueId x = def(r).args[0], c = def(r).args[1];
        for (int mo = 0; mo < 2; ++mo) {
          const ValueId q = def(m).args[mo], k = def(m).args[1 - mo];
          auto same_const = [&](ValueId u, ValueId w) {
            return u == w || (is_const(u) && is_const(w) && def(u).iimm == def(w).iimm);
          };
          if (same_const(k, c) && is_op(q, ScalarOp::idiv) && def(q).args[0] == x &&
              same_const(def(q).args[1], c))
            return x;
        }
      }
      break;
    }
    default:
      break;
  }
  return kNoValue;
}

void KernelBuilder::set_upper_bound(ValueId v, int64_t upper) {
  // Both bounds hold (a loop variable's extent, then a pad's span): the tighter one.
  int64_t& u = upper_.at(size_t(v));
  u = u >= 0 ? std::min(u, upper) : upper;
  range_done_.at(size_t(v)) = 0;
}

std::optional<KernelBuilder::Range> KernelBuilder::range(ValueId v) const {
  const ValueDef& d = def(v);
  if (d.type != DType::i64) return std::nullopt;
  if (range_done_[size_t(v)]) return range_[size_t(v)];
  std::optional<Range> r;
  // Bounds computed in 128 bits; a range outside int64 is unknown.
  auto make = [&](__int128 lo, __int128 hi) -> std::optional<Range> {
    if (lo < INT64_MIN || hi > INT64_MAX || lo > hi) return std::nullopt;
    return Range{int64_t(lo), int64_t(hi)};
  };
  auto arg = [&](int i) { return range(d.args[i]); };
  if (d.op == ScalarOp::const_) {
    r = Range{d.iimm, d.iimm};
  } else if (scalar_op_arity(d.op) == 2 || d.op == ScalarOp::select) {
    const int first = d.op == ScalarOp::select ? 1 : 0;
    const std::optional<Range> a = arg(first), b = arg(first + 1);
    if (a && b) {
      const __int128 alo = a->lo, ahi = a->hi, blo = b->lo, bhi = b->hi;
      switch (d.op) {
        case ScalarOp::add:
          r = make(alo + blo, ahi + bhi);
          break;
        case ScalarOp::sub:
          r = make(alo - bhi, ahi - blo);
          break;
        case ScalarOp::mul: {
          const __int128 p[] = {alo * blo, alo * bhi, ahi * blo, ahi * bhi};
          r = make(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
          break;
        }
        case ScalarOp::min:
          r = make(std::min(alo, blo), std::min(ahi, bhi));
          break;
        case ScalarOp::max:
          r = make(std::max(alo, blo), std::max(ahi, bhi));
          break;
        case ScalarOp::select:
          r = make(std::min(alo, blo), std::max(ahi, bhi));
          break;
        case ScalarOp::idiv:  // non-negative by a positive divisor (kernel_ir.h)
          if (alo >= 0 && blo > 0) r = make(alo / bhi, ahi / blo);
          break;
        case ScalarOp::imod:
          if (alo >= 0 && blo > 0) r = make(0, std::min(ahi, bhi - 1));
          break;
        default:
          break;
      }
    }
  }
  // A declared bound narrows what the operands say (a pad's offset, declared
  // [0, len), may be known to lie inside the row's cut).
  if (const int64_t u = upper_[size_t(v)]; u > 0 && d.op != ScalarOp::const_)
    r = r ? make(std::max<int64_t>(r->lo, 0), std::min(r->hi, u - 1)) : Range{0, u - 1};
  range_[size_t(v)] = r;
  range_done_[size_t(v)] = 1;
  return r;
}

ValueId KernelBuilder::fold_by_range(ScalarOp op, ValueId a, ValueId b) {
  if (type(a) != DType::i64) return kNoValue;
  const std::optional<Range> ra = range(a), rb = range(b);
  if (!ra || !rb) return kNoValue;
  auto truth = [&](bool v) { return iconst(v, DType::b8); };
  // a < b always, never, or either.
  auto less = [&](const Range& x, const Range& y) -> int {
    if (x.hi < y.lo) return 1;
    if (x.lo >= y.hi) return 0;
    return -1;
  };
  int t = -1;
  switch (op) {
    case ScalarOp::lt:
      t = less(*ra, *rb);
      break;
    case ScalarOp::gt:
      t = less(*rb, *ra);
      break;
    case ScalarOp::le:
      t = less(*rb, *ra);
      t = t < 0 ? t : 1 - t;
      break;
    case ScalarOp::ge:
      t = less(*ra, *rb);
      t = t < 0 ? t : 1 - t;
      break;
    case ScalarOp::eq:
    case ScalarOp::ne:
      if (ra->hi < rb->lo || rb->hi < ra->lo)
        t = 0;
      else if (ra->lo == ra->hi && rb->lo == rb->hi)
        t = 1;
      if (t >= 0 && op == ScalarOp::ne) t = 1 - t;
      break;
    case ScalarOp::min:
      if (ra->hi <= rb->lo) return a;
      if (rb->hi <= ra->lo) return b;
      return kNoValue;
    case ScalarOp::max:
      if (ra->lo >= rb->hi) return a;
      if (rb->lo >= ra->hi) return b;
      return kNoValue;
    default:
      return kNoValue;
  }
  return t < 0 ? kNoValue : truth(t == 1);
}

int64_t KernelBuilder::upper_bound(ValueId v) const {
  const ValueDef& d = def(v);
  if (d.type != DType::i64) return -1;
  if (upper_[size_t(v)] >= 0) return upper_[size_t(v)];
  auto ub = [&](int i) { return upper_bound(d.args[i]); };
  switch (d.op) {
    case ScalarOp::const_:
      return d.iimm >= 0 ? d.iimm + 1 : -1;
    case ScalarOp::imod:
      return is_const(d.args[1]) ? def(d.args[1]).iimm : -1;
    case ScalarOp::idiv: {
      const int64_t u = ub(0);
      const int64_t c = is_const(d.args[1]) ? def(d.args[1]).iimm : 0;
      return u >= 0 && c > 0 ? (u + c - 1) / c : -1;
    }
    case ScalarOp::add: {
      const int64_t u0 = ub(0), u1 = ub(1);
      return u0 >= 0 && u1 >= 0 ? u0 + u1 - 1 : -1;
    }
    case ScalarOp::mul: {
      const int64_t u0 = ub(0), u1 = ub(1);
      return u0 > 0 && u1 > 0 ? (u0 - 1) * (u1 - 1) + 1 : -1;
    }
    default:
      return -1;
  }
}

// pow with a constant exponent that multiplication computes exactly enough (and on
// bool, a || !b).
ValueId KernelBuilder::fold_pow(ValueId a, ValueId b) {
  const DType t = type(a);
  if (t == DType::b8) {
    if (is_const(b)) return const_value(b) != 0 ? a : iconst(1, DType::b8);
    return binary(ScalarOp::or_, a, unary(ScalarOp::not_, b));
  }
  if (!is_const(b)) return kNoValue;
  const double e = const_value(b);
  auto mul = [&](ValueId x, ValueId y) { return binary(ScalarOp::mul, x, y); };
  if (e == 0) return constant(t, 1);
  if (e == 1) return a;
  if (e == 2) return mul(a, a);
  if (e == 3) return mul(mul(a, a), a);
  if (e == 4) return mul(mul(a, a), mul(a, a));
  if (is_floating(t) && e == -1) return binary(ScalarOp::div, constant(t, 1), a);
  if (is_floating(t) && e == -2) return binary(ScalarOp::div, constant(t, 1), mul(a, a));
  return kNoValue;
}

ValueId KernelBuilder::binary(ScalarOp op, ValueId a, ValueId b) {
  KILN_CHECK(type(a) == type(b), "kernel builder: ", scalar_op_name(op), " of ",
             dtype_name(type(a)), " and ", dtype_name(type(b)));
  if (op == ScalarOp::pow)
    if (ValueId f = fold_pow(a, b); f != kNoValue) return f;
  if (ValueId f = fold_binary(op, a, b); f != kNoValue) return f;
  if (ValueId f = fold_index(op, a, b); f != kNoValue) return f;
  if (ValueId f = fold_by_range(op, a, b); f != kNoValue) return f;
  // Commutative ops get a canonical operand order so CSE sees a+b == b+a.
  switch (op) {
    case ScalarOp::add:
    case ScalarOp::mul:
    case ScalarOp::eq:
    case ScalarOp::ne:
    case ScalarOp::and_:
    case ScalarOp::or_:
      if (a > b) std::swap(a, b);
      break;
    default:
      break;
  }
  ValueDef d;
  d.op = op;
  d.type = is_comparison(op) ? DType::b8 : type(a);
  d.args[0] = a;
  d.args[1] = b;
  return add_value(d);
}

ValueId KernelBuilder::select(ValueId c, ValueId a, ValueId b) {
  KILN_CHECK(type(c) == DType::b8 && type(a) == type(b), "kernel builder: select types");
  if (is_const(c)) return def(c).iimm ? a : b;
  if (a == b) return a;
  // A choice between two reads of one buffer is one read at the chosen index.
  if (is_op(a, ScalarOp::load) && is_op(b, ScalarOp::load) && def(a).ref == def(b).ref)
    return load(def(a).ref, select(c, def(a).args[0], def(b).args[0]));
  if (ValueId f = factor_select(c, a, b); f != kNoValue) return f;
  if (ValueId f = fold_masked_loads(c, a, b); f != kNoValue) return f;
  ValueDef d;
  d.op = ScalarOp::select;
  d.type = type(a);
  d.args[0] = c;
  d.args[1] = a;
  d.args[2] = b;
  return add_value(d);
}

ValueId KernelBuilder::philox(ValueId key, ValueId counter, DType t) {
  KILN_CHECK(type(key) == DType::i64 && type(counter) == DType::i64 &&
                 (t == DType::f32 || t == DType::f64 || t == DType::i64),
             "kernel builder: philox types");
  ValueDef d;
  d.op = ScalarOp::philox;
  d.type = t;
  d.args[0] = key;
  d.args[1] = counter;
  return add_value(d);
}

ValueId KernelBuilder::philox_below(ValueId key, ValueId counter, ValueId bound) {
  KILN_CHECK(type(key) == DType::i64 && type(counter) == DType::i64 && type(bound) == DType::i64,
             "kernel builder: philox_below types");
  ValueDef d;
  d.op = ScalarOp::philox_below;
  d.type = DType::i64;
  d.args[0] = key;
  d.args[1] = counter;
  d.args[2] = bound;
  return add_value(d);
}

void KernelBuilder::add_terms(ValueId v, std::vector<ValueId>& terms, int64_t& constant,
                              int depth) const {
  if (is_const(v)) {
    constant += def(v).iimm;
  } else if (is_op(v, ScalarOp::add) && depth < 8) {
    add_terms(def(v).args[0], terms, constant, depth + 1);
    add_terms(def(v).args[1], terms, constant, depth + 1);
  } else {
    terms.push_back(v);
  }
}

bool KernelBuilder::same_const(ValueId a, ValueId b) const {
  // Bitwise for floats: a -0.0 fill (cat's pads) is not a +0.0 one.
  return a == b || (is_const(a) && is_const(b) && type(a) == type(b) &&
                    std::bit_cast<uint64_t>(def(a).fimm) == std::bit_cast<uint64_t>(def(b).fimm) &&
                    def(a).iimm == def(b).iimm);
}

// Reads behind masks, as a pad reads its operand (select(valid, load, 0)), stay
// one read behind one mask when masked again or chosen between: a padded image's
// windows stacked tap by tap (a conv's patches) are one load an element, where
// each tap would otherwise be a load of its own.
//   select(c, select(m, x, z), z)                  -> select(c and m, x, z)
//   select(c, select(m, load(i), z), select(n, load(j), z))
//                                                  -> select(c ? m : n, load(c ? i : j), z)
// (either side may be an unmasked load of the same buffer).
ValueId KernelBuilder::fold_masked_loads(ValueId c, ValueId a, ValueId b) {
  struct Masked {
    ValueId mask = kNoValue, value = kNoValue, fill = kNoValue;  // fill: none when unmasked
  };
  auto split = [&](ValueId x) {
    if (is_op(x, ScalarOp::select) && is_const(def(x).args[2]))
      return Masked{def(x).args[0], def(x).args[1], def(x).args[2]};
    return Masked{kNoValue, x, kNoValue};
  };
  const Masked ma = split(a), mb = split(b);
  if (ma.fill != kNoValue && same_const(ma.fill, b))
    return select(binary(ScalarOp::and_, c, ma.mask), ma.value, b);
  if (ma.fill == kNoValue && mb.fill == kNoValue) return kNoValue;
  if (ma.fill != kNoValue && mb.fill != kNoValue && !same_const(ma.fill, mb.fill)) return kNoValue;
  if (!is_op(ma.value, ScalarOp::load) || !is_op(mb.value, ScalarOp::load) ||
      def(ma.value).ref != def(mb.value).ref)
    return kNoValue;
  const ValueId yes = constant(DType::b8, 1);
  const ValueId mask =
      select(c, ma.fill != kNoValue ? ma.mask : yes, mb.fill != kNoValue ? mb.mask : yes);
  return select(mask, select(c, ma.value, mb.value), ma.fill != kNoValue ? ma.fill : mb.fill);
}

ValueId KernelBuilder::factor_select(ValueId c, ValueId a, ValueId b) {
  if (type(a) != DType::i64 || (!is_op(a, ScalarOp::add) && !is_op(b, ScalarOp::add)))
    return kNoValue;
  std::vector<ValueId> ta, tb, common;
  int64_t ka = 0, kb = 0;
  add_terms(a, ta, ka, 0);
  add_terms(b, tb, kb, 0);
  for (auto it = ta.begin(); it != ta.end();) {
    auto j = std::find(tb.begin(), tb.end(), *it);
    if (j == tb.end()) {
      ++it;
      continue;
    }
    common.push_back(*it);
    tb.erase(j);
    it = ta.erase(it);
  }
  if (common.empty()) return kNoValue;
  auto sum = [&](const std::vector<ValueId>& terms, int64_t k) {
    ValueId s = iconst(k);
    for (ValueId t : terms) s = binary(ScalarOp::add, s, t);
    return s;
  };
  ValueId r = select(c, sum(ta, ka), sum(tb, kb));
  for (ValueId t : common) r = binary(ScalarOp::add, r, t);
  return r;
}

void KernelBuilder::push_stmt(Stmt s) {
  blocks_.back()->push_back(std::move(s));
}

void KernelBuilder::open_block(Stmt s) {
  blocks_.back()->push_back(std::move(s));
  blocks_.push_back(&blocks_.back()->back().body);
  scopes_.emplace_back();
}

void KernelBuilder::close_block(StmtKind kind) {
  KILN_CHECK(blocks_.size() > 1, "kernel builder: no open block to close");
  blocks_.pop_back();
  scopes_.pop_back();
  KILN_CHECK(blocks_.back()->back().kind == kind, "kernel builder: mismatched block close");
}

void KernelBuilder::store(int32_t buffer, ValueId idx, ValueId value) {
  Stmt s;
  s.kind = StmtKind::store;
  s.ref = buffer;
  s.index = idx;
  s.value = value;
  push_stmt(std::move(s));
}

int32_t KernelBuilder::begin_loop(int64_t extent) {
  const int32_t var = k_.num_loops++;
  Stmt s;
  s.kind = StmtKind::loop;
  s.ref = var;
  s.extent = extent;
  open_block(std::move(s));
  set_upper_bound(index(var), extent);
  return var;
}

void KernelBuilder::end_loop() {
  close_block(StmtKind::loop);
}

void KernelBuilder::begin_if(ValueId cond) {
  Stmt s;
  s.kind = StmtKind::if_;
  s.value = cond;
  open_block(std::move(s));
}

void KernelBuilder::end_if() {
  close_block(StmtKind::if_);
}

void KernelBuilder::acc_init(int32_t acc) {
  Stmt s;
  s.kind = StmtKind::acc_init;
  s.ref = acc;
  push_stmt(std::move(s));
}

void KernelBuilder::acc_update(int32_t acc, ValueId value, ValueId position) {
  Stmt s;
  s.kind = StmtKind::acc_update;
  s.ref = acc;
  s.value = value;
  s.index = position;
  push_stmt(std::move(s));
}

ValueId KernelBuilder::memo_find(const std::string& key) const {
  for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
    auto it = s->memo.find(key);
    if (it != s->memo.end()) return it->second;
  }
  return kNoValue;
}

void KernelBuilder::memo_put(const std::string& key, ValueId v) {
  scopes_.back().memo[key] = v;
}

}  // namespace kiln::kir
