// Lowering of fusion groups to the kernel IR (see lower.h for the loop shapes).
//
// The core is `eval(value, coords)`: the kernel IR value of a graph value at
// given coordinates of its own shape. Elementwise nodes evaluate their operands
// at the broadcast coordinates and apply one scalar op; movement nodes map the
// coordinates (reshape keeps the linear index, permute/expand/slice map dims,
// pad guards with a select); group inputs are loads; finished reductions are
// accumulator reads. Coordinates carry a linear index, per-dim values, or both,
// and convert lazily, so chains of same-shape elementwise ops never divide.
#include "codegen/lower.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "codegen/kernel_builder.h"
#include "codegen/lower_ops.h"
#include "ir/error.h"

namespace kiln {
namespace {

using kir::kNoValue;
using kir::ReduceKind;
using kir::ScalarOp;
using kir::ValueId;

// Inner loops shorter than this are not worth splitting rows for.
constexpr int64_t kMinInnerExtent = 16;

struct Coords {
  Shape shape;
  std::vector<ValueId> dims;  // per-dim coordinates; empty until materialised
  ValueId linear = kNoValue;  // row-major linear index; kNoValue until materialised
  bool has_dims() const { return shape.empty() || !dims.empty(); }
};

enum class Mode { flat, rows };

bool is_reduce(OpKind k) {
  return op_info(k).category == OpCategory::Reduce;
}

bool is_arg_reduce(OpKind k) {
  return k == OpKind::argmax || k == OpKind::argmin;
}

// The reduced dims of a reduction node, normalised and sorted.
std::vector<int64_t> reduced_dims(const Node& n, int64_t rank) {
  if (is_arg_reduce(n.op)) {
    if (!n.attrs.has(AttrKey::dim) || rank == 0) {
      std::vector<int64_t> all(rank);
      for (int64_t d = 0; d < rank; ++d) all[d] = d;
      return all;
    }
    return {normalize_dim(n.attrs.i(AttrKey::dim), rank)};
  }
  return normalize_dims(n.attrs.ints(AttrKey::dims), rank);
}

SourceLoc group_loc(const Graph& g, const FusionGroup& grp) {
  for (NodeId id : grp.nodes)
    if (g.node(id).loc.known()) return g.node(id).loc;
  return {};
}

class Lowering {
 public:
  Lowering(const Graph& g, const FusionGroup& grp, const LowerOptions& opts, Mode mode)
      : g_(g), grp_(grp), opts_(opts), mode_(mode), kb_("kernel") {
    for (NodeId id : grp.nodes) members_.insert(id);
  }

  kir::Kernel run() {
    switch (grp_.kind) {
      case GroupKind::Elementwise:
      case GroupKind::Copy:
      case GroupKind::Matmul:
        lower_map();
        break;
      case GroupKind::Reduction:
        lower_reduction();
        break;
      case GroupKind::Opaque:
        fail("an opaque group (", op_name(g_.node(grp_.nodes.at(0)).op),
             ") has no compiled kernel; the runtime runs it");
    }
    kir::Kernel k = kb_.take();
    kir::verify_kernel(k);
    return k;
  }

  int delinearized() const { return delinearized_; }

 private:
  template <class... A>
  [[noreturn]] void fail(const A&... a) {
    std::ostringstream os;
    os << "cannot lower ";
    os << group_kind_name(grp_.kind) << " group starting at %"
       << (grp_.nodes.empty() ? 0 : grp_.nodes[0]) << ": ";
    (os << ... << a);
    throw Error(os.str(), group_loc(g_, grp_));
  }

  // ---- Buffers ----

  void add_input(Value v) {
    if (in_buf_.count(v)) return;
    kir::Buffer b;
    b.dtype = g_.type(v).dtype;
    b.shape = g_.type(v).shape;
    b.value = v;
    in_buf_[v] = kb_.add_buffer(b);
  }

  int32_t add_output(Value v) {
    kir::Buffer b;
    b.dtype = g_.type(v).dtype;
    b.shape = g_.type(v).shape;
    b.output = true;
    b.value = v;
    return kb_.add_buffer(b);
  }

  // Inputs, then outputs. Matmul groups read the matmul's result instead of its
  // operands, and only the inputs the epilogue uses.
  std::vector<Value> setup_buffers() {
    std::vector<Value> outs;
    if (grp_.kind == GroupKind::Matmul) {
      const NodeId mm = grp_.nodes.at(0);
      if (g_.node(mm).op != OpKind::matmul) fail("the first node is not a matmul");
      add_input(Value(mm));
      std::unordered_set<Value, ValueHash> used;
      for (NodeId id : grp_.nodes)
        if (id != mm)
          for (Value o : g_.node(id).operands) used.insert(o);
      for (Value v : grp_.inputs)
        if (used.count(v)) add_input(v);
      members_.erase(mm);
      for (Value v : grp_.outputs)
        if (v.node != mm) outs.push_back(v);
    } else {
      for (Value v : grp_.inputs) add_input(v);
      outs = grp_.outputs;
    }
    for (Value v : outs) {
      if (!members_.count(v.node)) fail("output %", v.node, " is not computed by the group");
    }
    return outs;
  }

  // ---- Coordinates ----

  std::vector<ValueId> delinearize(ValueId lin, const Shape& s) {
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

  // Horner form ((d0 * s1 + d1) * s2 + d2) ..., which the builder's folds invert
  // against delinearize exactly.
  ValueId linearize(const std::vector<ValueId>& d, const Shape& s) {
    if (s.empty()) return kb_.iconst(0);
    ValueId acc = d[0];
    for (size_t i = 1; i < s.size(); ++i)
      acc = kb_.binary(ScalarOp::add, kb_.binary(ScalarOp::mul, acc, kb_.iconst(s[i])), d[i]);
    return acc;
  }

  const std::vector<ValueId>& dims(Coords& c) {
    if (!c.has_dims()) c.dims = delinearize(c.linear, c.shape);
    return c.dims;
  }

  ValueId linear(Coords& c) {
    if (c.linear == kNoValue) c.linear = linearize(c.dims, c.shape);
    return c.linear;
  }

  // Coordinates of an operand of shape `to` broadcast to c's shape.
  Coords broadcast(Coords& c, const Shape& to) {
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

  // ---- Values ----

  std::string memo_key(Value v, Coords& c) {
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

  ValueId eval(Value v, Coords& c) {
    const std::string key = memo_key(v, c);
    if (ValueId m = kb_.memo_find(key); m != kNoValue) return m;
    const ValueId r = eval_uncached(v, c);
    kb_.memo_put(key, r);
    return r;
  }

  ValueId eval_uncached(Value v, Coords& c) {
    if (auto it = in_buf_.find(v); it != in_buf_.end()) return kb_.load(it->second, linear(c));
    if (!members_.count(v.node))
      fail("%", v.node, " is neither a member nor an input of the group");
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
      default:
        fail(op_name(n.op), " (%", v.node, ") cannot be part of a compiled kernel");
    }
  }

  ValueId creation(NodeId id, const Node& n, Coords& c) {
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
            tab.idata.push_back(t == DType::i32 ? int64_t(int32_t(v)) : v);
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

  ValueId movement(const Node& n, Coords& c) {
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
      case OpKind::pad: {
        const int64_t d = normalize_dim(n.attrs.i(AttrKey::dim), rank);
        const int64_t low = n.attrs.i(AttrKey::low, 0);
        const int64_t gap = n.attrs.i(AttrKey::interior, 0) + 1;
        const int64_t len = in[d];
        const DType t = n.type().dtype;
        if (len == 0) return kb_.constant(t, 0);
        // Input element i sits at low + i * gap; the span covers [low, low + (len-1)*gap].
        const ValueId x = dims(c)[d];
        const ValueId lo = kb_.iconst(low), hi = kb_.iconst(low + (len - 1) * gap);
        ValueId valid = kb_.binary(ScalarOp::and_, kb_.binary(ScalarOp::ge, x, lo),
                                   kb_.binary(ScalarOp::le, x, hi));
        // Clamp so the operand is always read in bounds; the select hides the value.
        const ValueId off = kb_.select(valid, kb_.binary(ScalarOp::sub, x, lo), kb_.iconst(0));
        ValueId pos = off;
        if (gap > 1) {
          pos = kb_.binary(ScalarOp::idiv, off, kb_.iconst(gap));
          const ValueId on_grid = kb_.binary(
              ScalarOp::eq, kb_.binary(ScalarOp::imod, off, kb_.iconst(gap)), kb_.iconst(0));
          valid = kb_.binary(ScalarOp::and_, valid, on_grid);
        }
        Coords oc;
        oc.shape = in;
        oc.dims = dims(c);
        oc.dims[d] = pos;
        const ValueId v = eval(src, oc);
        return kb_.select(valid, v, kb_.constant(t, 0));
      }
      default:
        fail("unknown movement op ", op_name(n.op));
    }
  }

  // ---- Reductions ----

  struct RowSpace {
    Shape in_shape;
    std::vector<char> reduced;  // per dim of in_shape
    Shape kept, red;            // shapes of the kept and reduced dims
    int64_t rows = 1, extent = 1;
    int64_t inner = 1;            // elements after the reduced block
    ValueId row_base = kNoValue;  // see row_prefix
  };

  ValueId reduction_result(NodeId id, const Node& n, Coords& c) {
    auto it = red_acc_.find(id);
    if (it == red_acc_.end())
      fail(op_name(n.op), " %", id, " is used before its reduction loop has finished");
    // The coordinates must be the current row's: only then is the accumulator the value.
    // Every reduction result has one element per row, in row order, so it is
    // the current row's exactly when its linear index is the outer index.
    const ValueId lin = linear(c);
    const bool zero_row =
        kb_.upper_bound(row_) == 1 && kb_.is_const(lin) && kb_.const_value(lin) == 0;
    if (lin != row_ && !zero_row)
      fail("the result of ", op_name(n.op), " %", id,
           " is read at another row than the one it was reduced for");
    const ValueId acc = kb_.acc_value(it->second);
    return kb_.cast(acc, n.type().dtype);
  }

  // The part of the reduction input's linear index that depends on the row only,
  // when the reduced dims form one contiguous block (then the index is affine in
  // the reduced position j: row_base + j * inner). Built before the loops.
  void row_prefix() {
    int64_t first = -1, last = -1;
    for (size_t d = 0; d < rs_.reduced.size(); ++d) {
      if (!rs_.reduced[d]) continue;
      if (first < 0) first = int64_t(d);
      last = int64_t(d);
    }
    bool block = first >= 0;
    for (int64_t d = first; block && d <= last; ++d) block = rs_.reduced[d];
    if (!block) return;
    rs_.inner = 1;
    for (size_t d = size_t(last) + 1; d < rs_.in_shape.size(); ++d) rs_.inner *= rs_.in_shape[d];
    const ValueId in = kb_.iconst(rs_.inner);
    const ValueId outer = kb_.binary(ScalarOp::idiv, row_, in);
    const ValueId rest = kb_.binary(ScalarOp::imod, row_, in);
    rs_.row_base = kb_.binary(
        ScalarOp::add, kb_.binary(ScalarOp::mul, outer, kb_.iconst(rs_.inner * rs_.extent)), rest);
  }

  // The reduced position in `loop`: the constant 0 when the reduced dims hold one
  // element, so that index arithmetic folds and reads of the reduction's result
  // at the current row are recognised as such (softmax over a size-1 dim).
  ValueId reduced_index(int32_t loop) {
    return rs_.extent == 1 ? kb_.iconst(0) : kb_.index(loop);
  }

  // Coordinates of the reduction input for the current row and reduced position j.
  Coords row_coords(ValueId j) {
    Coords c;
    c.shape = rs_.in_shape;
    const std::vector<ValueId> rd = delinearize(j, rs_.red);
    size_t ki = 0, ri = 0;
    for (size_t d = 0; d < rs_.in_shape.size(); ++d)
      c.dims.push_back(rs_.reduced[d] ? rd[ri++] : row_dims_[ki++]);
    if (rs_.row_base != kNoValue) {
      c.linear = kb_.binary(ScalarOp::add, rs_.row_base,
                            kb_.binary(ScalarOp::mul, j, kb_.iconst(rs_.inner)));
    } else if (rs_.extent == 1 && rs_.red.empty()) {
      c.linear = row_;
    }
    return c;
  }

  void lower_reduction() {
    const std::vector<Value> outs = setup_buffers();
    std::vector<NodeId> reds;
    for (NodeId id : grp_.nodes)
      if (is_reduce(g_.node(id).op)) reds.push_back(id);
    if (reds.empty()) fail("a reduction group without a reduction");
    const Node& first = g_.node(reds[0]);
    rs_.in_shape = g_.type(first.operands.at(0)).shape;
    const int64_t rank = int64_t(rs_.in_shape.size());
    const std::vector<int64_t> rdims = reduced_dims(first, rank);
    for (NodeId id : reds) {
      const Node& n = g_.node(id);
      if (g_.type(n.operands.at(0)).shape != rs_.in_shape || reduced_dims(n, rank) != rdims)
        fail("reductions %", reds[0], " and %", id, " do not share their input shape and dims");
    }
    rs_.reduced.assign(rank, 0);
    for (int64_t d : rdims) rs_.reduced[d] = 1;
    for (int64_t d = 0; d < rank; ++d)
      (rs_.reduced[d] ? rs_.red : rs_.kept).push_back(rs_.in_shape[d]);
    rs_.rows = kiln::numel(rs_.kept);
    rs_.extent = kiln::numel(rs_.red);

    // Which members depend on a reduction (their full-size values need a later loop).
    std::unordered_set<NodeId> after;
    for (NodeId id : grp_.nodes) {
      const Node& n = g_.node(id);
      bool dep = is_reduce(n.op);
      for (Value o : n.operands) dep = dep || after.count(o.node);
      if (dep) after.insert(id);
    }
    std::vector<std::pair<Value, int32_t>> full_now, full_later, row_outs;
    for (Value v : outs) {
      const Shape& s = g_.type(v).shape;
      const int32_t b = add_output(v);
      if (s == rs_.in_shape)
        (after.count(v.node) ? full_later : full_now).push_back({v, b});
      else if (kiln::numel(s) == rs_.rows)
        row_outs.push_back({v, b});
      else
        fail("output %", v.node, " of shape ", shape_str(s), " is neither the reduction input's ",
             shape_str(rs_.in_shape), " nor one element per row (", rs_.rows, ")");
    }

    const std::vector<int32_t> keep = kept_operands(reds, full_later);
    kb_.kernel().range = rs_.rows;
    const ValueId r = kb_.index(0);
    kb_.set_upper_bound(r, rs_.rows);
    row_ = r;
    row_dims_ = delinearize(r, rs_.kept);
    row_prefix();
    auto store_full = [&](const std::vector<std::pair<Value, int32_t>>& list, Coords& c) {
      std::vector<ValueId> vals;
      for (const auto& [v, b] : list) vals.push_back(eval(v, c));
      for (size_t i = 0; i < list.size(); ++i) kb_.store(list[i].second, linear(c), vals[i]);
    };
    for (size_t i = 0; i < reds.size(); ++i) {
      const Node& n = g_.node(reds[i]);
      const DType in_t = g_.type(n.operands[0]).dtype, out_t = n.type().dtype;
      ReduceKind kind = ReduceKind::sum;
      DType acc_t = out_t;
      switch (n.op) {
        case OpKind::sum:
          kind = ReduceKind::sum;
          // Rows of up to 64K elements sum in their own type (the vectorized loop keeps
          // many partial sums, so the error stays ~1e-6 relative); longer extents sum
          // in f64 as the reference kernels do.
          acc_t = !is_floating(out_t) ? DType::i64 : rs_.extent <= 65536 ? out_t : DType::f64;
          break;
        case OpKind::max:
          kind = ReduceKind::max;
          break;
        case OpKind::min:
          kind = ReduceKind::min;
          break;
        case OpKind::argmax:
          kind = ReduceKind::argmax;
          acc_t = in_t;
          break;
        case OpKind::argmin:
          kind = ReduceKind::argmin;
          acc_t = in_t;
          break;
        default:
          fail("unknown reduction ", op_name(n.op));
      }
      const int32_t acc = kb_.add_accumulator(kind, acc_t);
      kb_.acc_init(acc);
      const int32_t loop = kb_.begin_loop(rs_.extent);
      const ValueId j = reduced_index(loop);
      Coords c = row_coords(j);
      const ValueId operand = eval(n.operands[0], c);
      kb_.acc_update(acc, kb_.cast(operand, acc_t), is_arg_reduce(n.op) ? j : kNoValue);
      if (i == 0) store_full(full_now, c);
      if (keep[i] >= 0) kb_.store(keep[i], linear(c), operand);
      kb_.end_loop();
      red_acc_[reds[i]] = acc;
    }
    if (!full_later.empty()) {
      const int32_t loop = kb_.begin_loop(rs_.extent);
      Coords c = row_coords(reduced_index(loop));
      const ValueId at = linear(c);  // before memo_key, which keys by the linear index once set
      for (size_t i = 0; i < reds.size(); ++i)
        if (keep[i] >= 0)
          kb_.memo_put(memo_key(g_.node(reds[i]).operands[0], c), kb_.load(keep[i], at));
      store_full(full_later, c);
      kb_.end_loop();
    }
    std::vector<ValueId> vals;
    for (const auto& [v, b] : row_outs) {
      Coords c;
      c.shape = g_.type(v).shape;
      c.linear = r;
      vals.push_back(eval(v, c));
    }
    for (size_t i = 0; i < row_outs.size(); ++i) kb_.store(row_outs[i].second, r, vals[i]);
  }

  // Softmax's exp: a reduction's expensive operand that a later full-size output
  // uses again is stored by the reduction loop into that output's buffer (same
  // shape and dtype) and loaded back by the last loop, from cache, before it
  // overwrites the element. Per reduction: the output buffer keeping it, or -1.
  std::vector<int32_t> kept_operands(const std::vector<NodeId>& reds,
                                     const std::vector<std::pair<Value, int32_t>>& full_later) {
    std::vector<int32_t> keep(reds.size(), -1);
    std::unordered_set<int32_t> used;
    std::unordered_set<Value, ValueHash> kept;
    for (size_t i = 0; i < reds.size(); ++i) {
      const Value v = g_.node(reds[i]).operands[0];
      auto per_element_expensive = [&](NodeId id) {  // a row-level op (a mean's div) is cheap
        return is_expensive(g_.node(id).op) && g_.node(id).type().shape == rs_.in_shape;
      };
      if (!members_.count(v.node) || g_.type(v).shape != rs_.in_shape || kept.count(v) ||
          !reaches(v.node, per_element_expensive))
        continue;
      for (const auto& [out, buf] : full_later) {
        if (used.count(buf) || g_.type(out).dtype != g_.type(v).dtype ||
            !reaches(out.node, [&](NodeId id) { return id == v.node; }))
          continue;
        keep[i] = buf;
        used.insert(buf);
        kept.insert(v);
        break;
      }
    }
    return keep;
  }

  // Whether `from` or a member it depends on without passing a reduction satisfies `pred`.
  template <class Pred>
  bool reaches(NodeId from, Pred pred) const {
    std::vector<NodeId> todo{from};
    std::unordered_set<NodeId> seen;
    while (!todo.empty()) {
      const NodeId id = todo.back();
      todo.pop_back();
      if (!members_.count(id) || !seen.insert(id).second) continue;
      if (pred(id)) return true;
      if (is_reduce(g_.node(id).op) && id != from) continue;
      for (Value o : g_.node(id).operands) todo.push_back(o.node);
    }
    return false;
  }

  // ---- Elementwise, copy and matmul epilogue ----

  void lower_map() {
    const std::vector<Value> outs = setup_buffers();
    if (outs.empty()) return;  // a lone matmul: nothing to compute
    Shape space = g_.type(outs[0]).shape;
    for (Value v : outs)
      if (g_.type(v).numel() > kiln::numel(space)) space = g_.type(v).shape;
    const int64_t n = kiln::numel(space);

    std::vector<int32_t> bufs;
    for (Value v : outs) bufs.push_back(add_output(v));
    if (opts_.epilogue_in_place) {
      if (grp_.kind != GroupKind::Matmul) fail("epilogue_in_place needs a matmul group");
      kir::Buffer& out0 = kb_.kernel().buffers[bufs[0]];
      const kir::Buffer& mm = kb_.kernel().buffers[0];
      if (out0.dtype != mm.dtype || out0.numel() != mm.numel())
        fail("the first epilogue output (", dtype_name(out0.dtype), shape_str(out0.shape),
             ") cannot overwrite the matmul result (", dtype_name(mm.dtype), shape_str(mm.shape),
             ")");
      out0.alias = 0;
    }
    for (const auto& [out_v, in_v] : opts_.in_place) {
      if (grp_.kind != GroupKind::Elementwise && grp_.kind != GroupKind::Matmul)
        fail("in-place outputs need an elementwise or matmul group");
      auto o = std::find(outs.begin(), outs.end(), out_v);
      auto in = in_buf_.find(in_v);
      if (o == outs.end() || in == in_buf_.end())
        fail("an in-place pair names a value that is not an output and an input of the group");
      kir::Buffer& ob = kb_.kernel().buffers[bufs[size_t(o - outs.begin())]];
      const kir::Buffer& ib = kb_.kernel().buffers[in->second];
      if (ob.dtype != ib.dtype || ob.numel() != ib.numel())
        fail("an in-place output differs from its input in dtype or size");
      ob.alias = in->second;
    }

    Coords base;
    base.shape = space;
    const ValueId i0 = kb_.index(0);
    if (mode_ == Mode::flat) {
      kb_.kernel().range = n;
      kb_.set_upper_bound(i0, n);
      base.linear = i0;
    } else {
      const int64_t e = space.back();
      kb_.kernel().range = n / e;
      kb_.set_upper_bound(i0, n / e);
      const Shape rows(space.begin(), space.end() - 1);
      std::vector<ValueId> rd = delinearize(i0, rows);
      const ValueId row_base = kb_.binary(ScalarOp::mul, i0, kb_.iconst(e));
      const int32_t loop = kb_.begin_loop(e);
      const ValueId j = kb_.index(loop);
      rd.push_back(j);
      base.dims = rd;
      base.linear = kb_.binary(ScalarOp::add, row_base, j);
    }
    std::vector<Coords> coords;
    std::vector<ValueId> vals;
    for (Value v : outs) {
      Coords c;
      if (g_.type(v).shape == space) {
        c = base;
      } else {
        c.shape = g_.type(v).shape;
        c.linear = base.linear;
      }
      vals.push_back(eval(v, c));
      coords.push_back(c);
    }
    // Stores last, after every load (so an in-place output never feeds a later read).
    for (size_t k = 0; k < outs.size(); ++k) {
      const int64_t m = g_.type(outs[k]).numel();
      const ValueId idx = linear(coords[k]);
      if (m < n) {
        kb_.begin_if(kb_.binary(ScalarOp::lt, idx, kb_.iconst(m)));
        kb_.store(bufs[k], idx, vals[k]);
        kb_.end_if();
      } else {
        kb_.store(bufs[k], idx, vals[k]);
      }
    }
    if (mode_ == Mode::rows) kb_.end_loop();
  }

  const Graph& g_;
  const FusionGroup& grp_;
  LowerOptions opts_;
  Mode mode_;
  kir::KernelBuilder kb_;
  std::unordered_set<NodeId> members_;
  std::unordered_map<Value, int32_t, ValueHash> in_buf_;
  std::unordered_map<NodeId, int32_t> tables_;
  std::unordered_map<NodeId, int32_t> red_acc_;
  RowSpace rs_;
  ValueId row_ = kNoValue;  // the outer index of a reduction kernel
  std::vector<ValueId> row_dims_;
  int delinearized_ = 0;
};

}  // namespace

namespace {

kir::Kernel lower_in_mode(const Graph& g, const FusionGroup& group, const LowerOptions& opts) {
  if (group.kind == GroupKind::Reduction) return Lowering(g, group, opts, Mode::flat).run();
  Lowering flat(g, group, opts, Mode::flat);
  kir::Kernel k = flat.run();
  // Per-element divisions: split rows so the inner loop is contiguous, if it is long enough.
  if (flat.delinearized() > 0 && !k.buffers.empty()) {
    const kir::Buffer* widest = nullptr;
    for (const kir::Buffer& b : k.buffers)
      if (b.output && (!widest || b.numel() > widest->numel())) widest = &b;
    if (widest && widest->shape.size() >= 2 && widest->shape.back() >= kMinInnerExtent)
      return Lowering(g, group, opts, Mode::rows).run();
  }
  return k;
}

}  // namespace

kir::Kernel lower_group(const Graph& g, const FusionGroup& group, const LowerOptions& opts) {
  if (group.nodes.empty()) throw Error("cannot lower an empty fusion group");
  kir::Kernel k = lower_in_mode(g, group, opts);
  for (size_t i = 0; i < k.buffers.size(); ++i)
    if (k.buffers[i].alias >= 0 && !reads_only_where_written(k, int32_t(i), k.buffers[i].alias))
      throw Error("the kernel reads buffer " + std::to_string(k.buffers[i].alias) +
                      " at other elements than it writes in place, so it cannot run in place",
                  g[group.nodes.front()].loc);
  return k;
}

}  // namespace kiln
