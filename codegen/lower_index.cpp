// Coordinates and values (see lowering.h): the linear index and per-dim
// coordinates of an element, and eval(value, coords) over a group's nodes:
// inputs as loads, elementwise ops, creation ops and movement ops as index maps.
#include "codegen/lowering.h"

#include <algorithm>

#include "codegen/lower_ops.h"

namespace kiln::lowering {

std::vector<ValueId> Lowering::delinearize(ValueId lin, const Shape& s) {
  const int64_t n = int64_t(s.size());
  std::vector<ValueId> d(n);
  // The outermost dim larger than 1 takes what is left, undivided.
  int64_t outer = 0;
  while (outer < n && s[outer] == 1) ++outer;
  ValueId rest = lin;
  for (int64_t i = n - 1; i >= 0; --i) {
    if (s[i] == 1) {
      d[i] = kb_.iconst(0);
    } else if (i == outer) {
      d[i] = rest;
    } else {
      d[i] = kb_.binary(ScalarOp::imod, rest, kb_.iconst(s[i]));
      rest = kb_.binary(ScalarOp::idiv, rest, kb_.iconst(s[i]));
      ++delinearized_;
    }
  }
  return d;
}

ValueId Lowering::linearize(const std::vector<ValueId>& d, const Shape& s) {
  if (s.empty()) return kb_.iconst(0);
  ValueId acc = d[0];
  for (size_t i = 1; i < s.size(); ++i)
    acc = kb_.binary(ScalarOp::add, kb_.binary(ScalarOp::mul, acc, kb_.iconst(s[i])), d[i]);
  return acc;
}

const std::vector<ValueId>& Lowering::dims(Coords& c) {
  if (!c.has_dims()) c.dims = delinearize(c.linear, c.shape);
  return c.dims;
}

ValueId Lowering::linear(Coords& c) {
  if (c.linear == kNoValue) c.linear = linearize(c.dims, c.shape);
  return c.linear;
}

Coords Lowering::broadcast(Coords& c, const Shape& to) {
  if (to == c.shape) return c;
  Coords o;
  o.shape = to;
  const int64_t lead = int64_t(c.shape.size()) - int64_t(to.size());
  if (lead < 0) fail("cannot broadcast ", shape_str(to), " to ", shape_str(c.shape));
  if (kiln::numel(to) == 1) {
    o.linear = kb_.iconst(0);
    o.dims.assign(to.size(), kb_.iconst(0));
    return o;
  }
  const std::vector<ValueId>& cd = dims(c);
  for (size_t i = 0; i < to.size(); ++i) {
    const int64_t from = c.shape[lead + i];
    if (to[i] == from) {
      o.dims.push_back(cd[lead + i]);
    } else if (to[i] == 1) {
      o.dims.push_back(kb_.iconst(0));
    } else {
      fail("cannot broadcast ", shape_str(to), " to ", shape_str(c.shape));
    }
  }
  return o;
}

std::string Lowering::memo_key(Value v, Coords& c) {
  std::string key = std::to_string(v.node);
  key += '.';
  key += std::to_string(v.index);
  if (c.linear != kNoValue) {
    key += 'L';
    key += std::to_string(c.linear);
    return key;
  }
  for (ValueId d : c.dims) {
    key += ',';
    key += std::to_string(d);
  }
  return key;
}

ValueId Lowering::checked_index(ValueId index, int64_t size) {
  const ValueId i = kb_.cast(index, DType::i64);
  const ValueId r =
      kb_.binary(ScalarOp::max, kb_.binary(ScalarOp::min, i, kb_.iconst(size - 1)), kb_.iconst(0));
  kb_.set_upper_bound(r, size);
  return r;
}

ValueId Lowering::gather(const Node& n, Coords& c) {
  const Shape& xs = g_.type(n.operands[0]).shape;
  const int64_t d =
      normalize_dim(n.attrs.i(AttrKey::dim), std::max<int64_t>(int64_t(xs.size()), 1));
  if (xs.empty()) return eval(n.operands[0], c);  // a scalar: every index is 0
  Coords xc;
  xc.shape = xs;
  xc.dims = dims(c);  // the indices' coordinates, which x shares outside dim d
  xc.dims[size_t(d)] = checked_index(eval(n.operands[1], c), xs[size_t(d)]);
  return eval(n.operands[0], xc);
}

ValueId Lowering::eval(Value v, Coords& c) {
  const std::string key = memo_key(v, c);
  if (ValueId m = kb_.memo_find(key); m != kNoValue) return m;
  const ValueId r = eval_uncached(v, c);
  kb_.memo_put(key, r);
  return r;
}

ValueId Lowering::eval_uncached(Value v, Coords& c) {
  if (auto it = in_buf_.find(v); it != in_buf_.end()) return kb_.load(it->second, linear(c));
  if (!members_.count(v.node)) fail("%", v.node, " is neither a member nor an input of the group");
  const Node& n = g_.node(v.node);
  switch (op_info(n.op).category) {
    case OpCategory::Creation:
      return creation(v.node, n, c);
    case OpCategory::Unary: {
      Coords oc = broadcast(c, g_.type(n.operands[0]).shape);
      const ValueId x = eval(n.operands[0], oc);
      return lower_elementwise(kb_, n, {&x, 1});
    }
    case OpCategory::Binary: {
      if (n.op == OpKind::add)
        if (const ValueId v = cat(n, c); v != kNoValue) return v;
      Coords ac = broadcast(c, g_.type(n.operands[0]).shape);
      Coords bc = broadcast(c, g_.type(n.operands[1]).shape);
      const ValueId ab[] = {eval(n.operands[0], ac), eval(n.operands[1], bc)};
      return lower_elementwise(kb_, n, ab);
    }
    case OpCategory::Ternary: {
      Coords cc = broadcast(c, g_.type(n.operands[0]).shape);
      Coords ac = broadcast(c, g_.type(n.operands[1]).shape);
      Coords bc = broadcast(c, g_.type(n.operands[2]).shape);
      const ValueId cab[] = {eval(n.operands[0], cc), eval(n.operands[1], ac),
                             eval(n.operands[2], bc)};
      return lower_elementwise(kb_, n, cab);
    }
    case OpCategory::Movement:
      return movement(n, c);
    case OpCategory::Reduce:
      return reduction_result(v.node, n, c);
    case OpCategory::Gather:
      return gather(n, c);
    default:
      fail(op_name(n.op), " (%", v.node, ") cannot be part of a compiled kernel");
  }
}

ValueId Lowering::creation(NodeId id, const Node& n, Coords& c) {
  const DType t = n.type().dtype;
  auto int_attr = [&](AttrKey k) {
    const AttrValue* a = n.attrs.find(k);
    return a && std::holds_alternative<int64_t>(*a);
  };
  switch (n.op) {
    case OpKind::constant:
      if (int_attr(AttrKey::value) && !is_floating(t))
        return kb_.iconst(n.attrs.i(AttrKey::value), t);
      return kb_.constant(t, n.attrs.f(AttrKey::value));
    case OpKind::literal: {
      const AttrValue* a = n.attrs.find(AttrKey::data);
      if (!a) fail("literal %", id, " has no data");
      kir::Table tab;
      tab.dtype = t;
      auto add = [&](double f, int64_t i, bool is_int) {
        if (is_floating(t)) {
          const double v = is_int ? double(i) : f;
          tab.fdata.push_back(t == DType::f32 ? double(float(v)) : v);
        } else if (t == DType::b8) {
          tab.idata.push_back(is_int ? i != 0 : f != 0);
        } else {
          int64_t v = is_int ? i : int64_t(f);
          tab.idata.push_back(t == DType::i32   ? int64_t(int32_t(v))
                              : t == DType::i16 ? int64_t(int16_t(v))
                              : t == DType::i8  ? int64_t(int8_t(v))
                              : t == DType::u8  ? int64_t(uint8_t(v))
                                                : v);
        }
      };
      if (const auto* ints = std::get_if<std::vector<int64_t>>(a)) {
        for (int64_t i : *ints) add(0, i, true);
      } else if (const auto* fl = std::get_if<std::vector<double>>(a)) {
        for (double f : *fl) add(f, 0, false);
      } else if (const auto* i = std::get_if<int64_t>(a)) {
        add(0, *i, true);
      } else if (const auto* f = std::get_if<double>(a)) {
        add(*f, 0, false);
      } else {
        fail("literal %", id, ": data must be numbers");
      }
      if (tab.size() == 1)
        return is_floating(t) ? kb_.constant(t, tab.fdata[0]) : kb_.iconst(tab.idata[0], t);
      if (tab.size() != n.type().numel())
        fail("literal %", id, " has ", tab.size(), " values for ", n.type().str());
      auto it = tables_.find(id);
      const int32_t ti = it != tables_.end() ? it->second : (tables_[id] = kb_.add_table(tab));
      return kb_.load_table(ti, linear(c));
    }
    case OpKind::arange: {
      const ValueId i = linear(c);
      if (!is_floating(t) && int_attr(AttrKey::start) &&
          (!n.attrs.has(AttrKey::step) || int_attr(AttrKey::step))) {
        ValueId v = kb_.binary(ScalarOp::mul, i, kb_.iconst(n.attrs.i(AttrKey::step, 1)));
        v = kb_.binary(ScalarOp::add, v, kb_.iconst(n.attrs.i(AttrKey::start)));
        return kb_.cast(v, t);
      }
      ValueId v = kb_.binary(ScalarOp::mul, kb_.cast(i, DType::f64),
                             kb_.constant(DType::f64, n.attrs.f(AttrKey::step, 1.0)));
      v = kb_.binary(ScalarOp::add, kb_.constant(DType::f64, n.attrs.f(AttrKey::start, 0.0)), v);
      return kb_.cast(v, t);
    }
    default:
      fail(op_name(n.op), " (%", id,
           ") cannot be part of a compiled kernel (random draws are opaque groups)");
  }
}

ValueId Lowering::movement(const Node& n, Coords& c) {
  const Value src = n.operands.at(0);
  const Shape& in = g_.type(src).shape;
  const int64_t rank = int64_t(in.size());
  switch (n.op) {
    case OpKind::reshape: {
      Coords oc;
      oc.shape = in;
      oc.linear = linear(c);
      return eval(src, oc);
    }
    case OpKind::detach:
    case OpKind::rebind:  // the value of operand 0
      return eval(src, c);
    case OpKind::expand: {
      Coords oc = broadcast(c, in);
      return eval(src, oc);
    }
    case OpKind::permute: {
      const std::vector<int64_t>& perm = n.attrs.ints(AttrKey::perm);
      const std::vector<ValueId>& cd = dims(c);
      Coords oc;
      oc.shape = in;
      oc.dims.assign(rank, kNoValue);
      for (int64_t i = 0; i < rank; ++i) oc.dims[normalize_dim(perm[i], rank)] = cd[i];
      return eval(src, oc);
    }
    case OpKind::slice: {
      const int64_t d = normalize_dim(n.attrs.i(AttrKey::dim), rank);
      const int64_t size = in[d], step = n.attrs.i(AttrKey::step, 1);
      int64_t start = n.attrs.i(AttrKey::start, 0);
      if (start < 0) start += size;
      start = std::min(std::max<int64_t>(start, 0), size);
      Coords oc;
      oc.shape = in;
      oc.dims = dims(c);
      oc.dims[d] =
          kb_.binary(ScalarOp::add, kb_.binary(ScalarOp::mul, oc.dims[d], kb_.iconst(step)),
                     kb_.iconst(start));
      return eval(src, oc);
    }
    case OpKind::unfold: {
      // Window i's element j: i step + j dilation along dim d (the windows'
      // own dim is last), affine in the output's coordinates.
      const int64_t d = normalize_dim(n.attrs.i(AttrKey::dim), rank);
      const int64_t step = n.attrs.i(AttrKey::step), dilation = n.attrs.i(AttrKey::dilation, 1);
      const std::vector<ValueId>& cd = dims(c);
      auto scaled = [&](ValueId i, int64_t by) {
        return by == 1 ? i : kb_.binary(ScalarOp::mul, i, kb_.iconst(by));
      };
      Coords oc;
      oc.shape = in;
      oc.dims.assign(cd.begin(), cd.end() - 1);
      oc.dims[d] = kb_.binary(ScalarOp::add, scaled(cd[d], step), scaled(cd.back(), dilation));
      return eval(src, oc);
    }
    case OpKind::pad: {
      const ValueId fill = kb_.constant(n.type().dtype, n.attrs.f(AttrKey::value, 0.0));
      if (in[normalize_dim(n.attrs.i(AttrKey::dim), rank)] == 0) return fill;
      ValueId valid;
      const ValueId v = pad_read(n, c, &valid);
      return kb_.select(valid, v, fill);
    }
    default:
      fail("unknown movement op ", op_name(n.op));
  }
}

ValueId Lowering::pad_read(const Node& n, Coords& c, ValueId* valid) {
  const Value src = n.operands.at(0);
  const Shape& in = g_.type(src).shape;
  const int64_t d = normalize_dim(n.attrs.i(AttrKey::dim), int64_t(in.size()));
  const int64_t low = n.attrs.i(AttrKey::low, 0);
  const int64_t gap = n.attrs.i(AttrKey::interior, 0) + 1;
  const int64_t len = in[d];
  // Input element i sits at low + i * gap; the span covers [low, low + (len-1)*gap].
  const ValueId x = dims(c)[d];
  const ValueId lo = kb_.iconst(low), hi = kb_.iconst(low + (len - 1) * gap);
  // x = j + k for an inner loop's position j: the guard holds for j in
  // [low - k, low + (len-1) gap - k] (see loop_segments). Not for the pieces
  // of a cat, whose choice stays a select per element anyway (conv2d's stacked
  // patches: cut, 1.14x the time, the edges' select chains run scalar).
  if (gap == 1 && !in_cat_) {
    std::vector<ValueId> xt;
    int64_t xk = 0;
    bool have_terms = false;
    for (size_t l = 0; l < loop_j_.size(); ++l) {
      if (loop_j_[l] == kNoValue) continue;
      if (!have_terms) kb_.add_terms(x, xt, xk), have_terms = true;
      std::vector<ValueId> jt;
      int64_t jk = 0;
      kb_.add_terms(loop_j_[l], jt, jk);
      if (xt == jt && !jt.empty()) {  // (a segment of one position has no edges)
        pad_edges_[l].push_back(low - (xk - jk));
        pad_edges_[l].push_back(low + len - (xk - jk));
      }
      // x = j / w + k (a plane's row): the guard holds for j in
      // [(low - k) w, (low + len - k) w).
      if (const int64_t w = loop_divisor(xt, ScalarOp::idiv, loop_j_[l]); w > 0) {
        pad_edges_[l].push_back((low - xk) * w);
        pad_edges_[l].push_back((low + len - xk) * w);
      }
    }
  }
  *valid =
      kb_.binary(ScalarOp::and_, kb_.binary(ScalarOp::ge, x, lo), kb_.binary(ScalarOp::le, x, hi));
  // Read where the guard may fail, unclamped, where that is proven in bounds
  // (a reduction's loop over an image, cut where it is; see unclamped_in_bounds).
  if (unclamped_pads_ && gap == 1 && !in_cat_ && len > 1 &&
      !(kb_.is_const(*valid) && kb_.const_value(*valid) == 0)) {
    std::vector<ValueId> ud = dims(c);
    ud[d] = kb_.binary(ScalarOp::sub, x, lo);
    ValueId at = kNoValue;
    if (unclamped_in_bounds(src, ud, &at)) {
      if (!kb_.is_const(*valid))
        if (const ValueId t = column_guard(x, low, len); t != kNoValue) *valid = t;
      Coords oc;
      oc.shape = in;
      oc.dims = std::move(ud);
      if (in_buf_.count(src)) oc.linear = at;
      return eval(src, oc);
    }
    // Clamped below, in a loop segment of a vector or more (see clamped_reads).
    for (ValueId j : loop_j_) {
      const auto r = j == kNoValue ? std::nullopt : kb_.range(j);
      if (r && r->hi - r->lo + 1 >= kVectorSegment && !kb_.is_const(*valid)) ++clamped_reads_;
    }
  }
  // Clamp so the operand is always read in bounds (a span of one element is read
  // at 0); the caller's select hides the value outside the span.
  ValueId pos = kb_.iconst(0);
  if (len > 1) {
    const ValueId off = kb_.select(*valid, kb_.binary(ScalarOp::sub, x, lo), kb_.iconst(0));
    // In [0, (len-1) gap]: said, so that the operand's linear index, row * len +
    // pos, comes apart again by folding instead of dividing per element.
    if (!kb_.is_const(off)) kb_.set_upper_bound(off, (len - 1) * gap + 1);
    pos = off;
    if (gap > 1) {
      pos = kb_.binary(ScalarOp::idiv, off, kb_.iconst(gap));
      const ValueId on_grid =
          kb_.binary(ScalarOp::eq, kb_.binary(ScalarOp::imod, off, kb_.iconst(gap)), kb_.iconst(0));
      *valid = kb_.binary(ScalarOp::and_, *valid, on_grid);
    }
  }
  Coords oc;
  oc.shape = in;
  oc.dims = dims(c);
  oc.dims[d] = pos;
  return eval(src, oc);
}

int64_t Lowering::loop_divisor(const std::vector<ValueId>& terms, ScalarOp op, ValueId j) const {
  if (terms.size() != 1) return 0;
  const kir::ValueDef& t = kb_.def(terms[0]);
  if (t.op != op || t.args[0] != j || !kb_.is_const(t.args[1])) return 0;
  return kb_.def(t.args[1]).iimm;
}

ValueId Lowering::column_guard(ValueId x, int64_t low, int64_t len) {
  // Tables of at most kMaxGuardTable positions (4 bytes each: 16 KiB, half of
  // a Zen 3 core's L1, for images of up to 64x64).
  constexpr int64_t kMaxGuardTable = 4096;
  if (kb_.is_const(x) || loop_j_.size() != 1 || loop_j_[0] == kNoValue) return kNoValue;
  const int64_t extent = cut_extents_.at(0);
  std::vector<ValueId> xt;
  int64_t xk = 0;
  kb_.add_terms(x, xt, xk);
  const int64_t w = loop_divisor(xt, ScalarOp::imod, loop_j_[0]);
  if (w <= 0 || extent > kMaxGuardTable) return kNoValue;
  const auto key = std::make_tuple(w, low - xk, len);
  auto it = guard_tables_.find(key);
  if (it == guard_tables_.end()) {
    kir::Table tab;
    tab.dtype = DType::i32;
    for (int64_t j = 0; j < extent; ++j) {
      const int64_t col = j % w + xk;
      tab.idata.push_back(col >= low && col < low + len ? 1 : 0);
    }
    it = guard_tables_.emplace(key, kb_.add_table(std::move(tab))).first;
  }
  return kb_.binary(ScalarOp::ne, kb_.load_table(it->second, loop_j_[0]),
                    kb_.iconst(0, DType::i32));
}

bool Lowering::unclamped_in_bounds(Value src, std::vector<ValueId> dims, ValueId* at) {
  const Shape& shape = g_.type(src).shape;
  if (!in_buf_.count(src)) {
    // Through another pad of one dim, unclamped in turn.
    if (!members_.count(src.node)) return false;
    const Node& p = g_.node(src.node);
    if (p.op != OpKind::pad || p.attrs.i(AttrKey::interior, 0) != 0) return false;
    const Value inner = p.operands.at(0);
    const int64_t d = normalize_dim(p.attrs.i(AttrKey::dim), int64_t(shape.size()));
    // Outside its span everywhere here, it reads nothing (its fill).
    const int64_t low = p.attrs.i(AttrKey::low, 0);
    const auto r = kb_.range(dims[size_t(d)]);
    if (r && (r->hi < low || r->lo > low + g_.type(inner).shape[size_t(d)] - 1)) return true;
    dims[size_t(d)] = kb_.binary(ScalarOp::sub, dims[size_t(d)], kb_.iconst(low));
    return unclamped_in_bounds(inner, std::move(dims), at);
  }
  ValueId j = kNoValue, rest = kNoValue;
  *at = affine_index(dims, shape, &j, &rest);
  const int64_t size = kiln::numel(shape);
  const auto r = kb_.range(*at);
  if (r && r->lo >= 0 && r->hi < size) return true;
  // at = rest + j: in bounds for j in [-rest.lo, size - rest.hi); where the
  // loop's positions cross those ends, they are cuts.
  const auto rr = rest == kNoValue ? std::nullopt : kb_.range(rest);
  const auto rj = j == kNoValue ? std::nullopt : kb_.range(j);
  if (!rr || !rj) return false;
  // (Only in a loop already cut at its guards' edges: in the whole loop every
  // tap's ends would count, too many cuts for the few reads that need them.)
  for (size_t l = 0; l < loop_j_.size(); ++l) {
    if (loop_j_[l] != j || l >= cuts_.size() || cuts_[l].empty()) continue;
    for (int64_t p : {-rr->lo, size - rr->hi})
      if (p > rj->lo && p <= rj->hi) pad_edges_[l].push_back(p);
  }
  return false;
}

ValueId Lowering::affine_index(const std::vector<ValueId>& dims, const Shape& s, ValueId* loop_term,
                               ValueId* rest) {
  // Terms and their coefficients (strides), repeated terms merged.
  std::vector<std::pair<ValueId, int64_t>> terms;
  int64_t constant = 0, stride = 1;
  auto add = [&](ValueId t, int64_t k) {
    for (auto& [v, c] : terms)
      if (v == t) return void(c += k);
    terms.push_back({t, k});
  };
  // v times k, through sums, differences and products by constants.
  auto expand = [&](auto& self, ValueId v, int64_t k, int depth) -> void {
    const kir::ValueDef& dv = kb_.def(v);
    const bool binary =
        depth < 8 && (dv.op == ScalarOp::add || dv.op == ScalarOp::sub || dv.op == ScalarOp::mul);
    if (kb_.is_const(v)) {
      constant += k * dv.iimm;
    } else if (binary && dv.op != ScalarOp::mul) {
      self(self, dv.args[0], k, depth + 1);
      self(self, dv.args[1], dv.op == ScalarOp::sub ? -k : k, depth + 1);
    } else if (binary && (kb_.is_const(dv.args[0]) || kb_.is_const(dv.args[1]))) {
      const int o = kb_.is_const(dv.args[0]) ? 0 : 1;
      self(self, dv.args[1 - o], k * kb_.def(dv.args[o]).iimm, depth + 1);
    } else {
      add(v, k);
    }
  };
  for (size_t d = s.size(); d-- > 0;) {
    expand(expand, dims[d], stride, 0);
    stride *= s[d];
  }
  std::erase_if(terms, [](const auto& t) { return t.second == 0; });
  // (q / w) at coefficient w c and (q % w) at c: q at c.
  for (bool merged = true; merged;) {
    merged = false;
    for (size_t a = 0; a < terms.size() && !merged; ++a) {
      const kir::ValueDef& da = kb_.def(terms[a].first);
      if (da.op != ScalarOp::idiv || !kb_.is_const(da.args[1])) continue;
      const int64_t w = kb_.def(da.args[1]).iimm;
      for (size_t b = 0; b < terms.size() && !merged; ++b) {
        const kir::ValueDef& db = kb_.def(terms[b].first);
        if (db.op != ScalarOp::imod || db.args[0] != da.args[0] || !kb_.is_const(db.args[1]) ||
            kb_.def(db.args[1]).iimm != w || terms[a].second != w * terms[b].second)
          continue;
        const ValueId q = da.args[0];
        const int64_t c = terms[b].second;
        terms.erase(terms.begin() + ptrdiff_t(std::max(a, b)));
        terms.erase(terms.begin() + ptrdiff_t(std::min(a, b)));
        add(q, c);
        merged = true;
      }
    }
  }
  *loop_term = kNoValue;
  ValueId sum = kb_.iconst(constant);
  for (const auto& [t, c] : terms) {
    if (c == 1 && *loop_term == kNoValue &&
        std::find(loop_j_.begin(), loop_j_.end(), t) != loop_j_.end()) {
      *loop_term = t;
      continue;
    }
    sum = kb_.binary(ScalarOp::add, sum, c == 1 ? t : kb_.binary(ScalarOp::mul, t, kb_.iconst(c)));
  }
  *rest = sum;
  return *loop_term == kNoValue ? sum : kb_.binary(ScalarOp::add, sum, *loop_term);
}

bool Lowering::cat_pieces(const Node& n, std::vector<const Node*>& pieces) const {
  for (Value o : n.operands) {
    if (!members_.count(o.node) || g_.type(o) != n.type()) return false;
    const Node& p = g_.node(o.node);
    if (p.op == OpKind::add) {
      if (!cat_pieces(p, pieces)) return false;
    } else if (p.op == OpKind::pad && g_.type(p.operands[0]).numel() > 0) {
      pieces.push_back(&p);
    } else {
      return false;
    }
  }
  return true;
}

ValueId Lowering::cat(const Node& n, Coords& c) {
  std::vector<const Node*> pieces;
  if (!cat_pieces(n, pieces)) return kNoValue;
  const int64_t rank = int64_t(n.type().shape.size());
  const int64_t d = normalize_dim(pieces[0]->attrs.i(AttrKey::dim), rank);
  // Spans [first, last] along d, in order; they must not overlap.
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const Node* p : pieces) {
    if (normalize_dim(p->attrs.i(AttrKey::dim), rank) != d) return kNoValue;
    const int64_t low = p->attrs.i(AttrKey::low, 0);
    const int64_t gap = p->attrs.i(AttrKey::interior, 0) + 1;
    spans.push_back({low, low + (g_.type(p->operands[0]).shape[d] - 1) * gap});
  }
  std::sort(spans.begin(), spans.end());
  bool covered = spans.front().first == 0 && spans.back().second == n.type().shape[d] - 1;
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first <= spans[i - 1].second) return kNoValue;
    covered = covered && spans[i].first == spans[i - 1].second + 1;
  }
  // Outside every span: the sum of the pieces' fills (each a zero, +0.0 or
  // cat's -0.0, which keeps x + fill = x inside the spans).
  double fill = 0.0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const double f = pieces[i]->attrs.f(AttrKey::value, 0.0);
    if (f != 0.0) return kNoValue;
    fill = i == 0 ? f : fill + f;
    covered = covered && pieces[i]->attrs.i(AttrKey::interior, 0) == 0;
  }
  // At a known position along d (a reduction's unrolled rows: the taps of a
  // depthwise conv's weight gradient and its bias row), the one piece there,
  // read as a pad of its own (cut at its operand's edges like any).
  if (const ValueId x = dims(c)[size_t(d)]; kb_.is_const(x)) {
    const int64_t at = kb_.def(x).iimm;
    for (const Node* p : pieces) {
      const int64_t low = p->attrs.i(AttrKey::low, 0);
      const int64_t gap = p->attrs.i(AttrKey::interior, 0) + 1;
      const int64_t last = low + (g_.type(p->operands[0]).shape[d] - 1) * gap;
      if (at >= low && at <= last && (at - low) % gap == 0) return movement(*p, c);
    }
    return kb_.constant(n.type().dtype, fill);
  }
  // The last piece is the default when the spans cover the dim; else the fill is.
  ValueId v = covered ? kNoValue : kb_.constant(n.type().dtype, fill);
  for (size_t i = pieces.size(); i-- > 0;) {
    ValueId valid;
    in_cat_ = true;
    const ValueId x = pad_read(*pieces[i], c, &valid);
    in_cat_ = false;
    v = v == kNoValue ? x : kb_.select(valid, x, v);
  }
  return v;
}

}  // namespace kiln::lowering
