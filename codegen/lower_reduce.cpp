// Reduction kernels (see lower.h): a loop over rows, an inner loop and an
// accumulator per reduction, one more inner loop for elementwise epilogues and
// full-size outputs (softmax's last map).
#include "codegen/lowering.h"

#include <algorithm>

namespace kiln::lowering {

ValueId Lowering::reduction_result(NodeId id, const Node& n, Coords& c) {
  auto it = red_acc_.find(id);
  if (it == red_acc_.end())
    fail(op_name(n.op), " %", id, " is used before its reduction loop has finished");
  // The coordinates must be the current row's: only then is the accumulator the value.
  // Every reduction result has one element per row, in row order, so it is
  // the current row's exactly when its linear index is the outer index.
  // With no rows (a dim of size 0 kept) the kernel reads nothing at all.
  const ValueId lin = linear(c);
  const bool zero_row =
      kb_.upper_bound(row_) == 1 && kb_.is_const(lin) && kb_.const_value(lin) == 0;
  if (lin != row_ && !zero_row && rs_.rows != 0)
    fail("the result of ", op_name(n.op), " %", id,
         " is read at another row than the one it was reduced for");
  const ValueId acc = kb_.acc_value(it->second);
  return kb_.cast(acc, n.type().dtype);
}

void Lowering::row_prefix() {
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

void Lowering::last_reduced_block() {
  rs_.red_last.clear();
  if (rs_.row_base != kNoValue) return;
  const size_t rank = rs_.in_shape.size();
  size_t d = rank;
  while (d > 0 && rs_.reduced[d - 1]) --d;
  if (d == rank || d == 0) return;
  bool others = false;
  for (size_t e = 0; e < d; ++e) others = others || (rs_.reduced[e] && rs_.in_shape[e] > 1);
  Shape last(rs_.in_shape.begin() + ptrdiff_t(d), rs_.in_shape.end());
  if (others && kiln::numel(last) >= 8) rs_.red_last = std::move(last);
}

Coords Lowering::row_coords(ValueId jo, ValueId ji) {
  Coords c;
  c.shape = rs_.in_shape;
  Shape outer(rs_.red.begin(), rs_.red.end() - ptrdiff_t(rs_.red_last.size()));
  std::vector<ValueId> rd = delinearize(jo, outer);
  const std::vector<ValueId> in = delinearize(ji, rs_.red_last);
  rd.insert(rd.end(), in.begin(), in.end());
  size_t ki = 0, ri = 0;
  std::vector<ValueId> first = {};  // the block's first element: its dims 0
  for (size_t d = 0; d < rs_.in_shape.size(); ++d) {
    const bool block = d + rs_.red_last.size() >= rs_.in_shape.size();
    c.dims.push_back(rs_.reduced[d] ? rd[ri++] : row_dims_[ki++]);
    first.push_back(block ? kb_.iconst(0) : c.dims.back());
  }
  // The block is the shape's last dims: its elements follow the first in order.
  c.linear = kb_.binary(ScalarOp::add, linearize(first, rs_.in_shape), ji);
  return c;
}

ValueId Lowering::reduced_index(int32_t loop) {
  return rs_.extent == 1 ? kb_.iconst(0) : kb_.index(loop);
}

Coords Lowering::row_coords(ValueId j) {
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

void Lowering::lower_reduction() {
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
  if (opts_.column_reductions && lower_column_reduction(outs, reds, rdims)) return;

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
  // Rows that differ only in their last kept dims, `unroll` of them, are folded
  // in one pass over the reduced dims (see unrolled_rows); else one row at a time.
  const size_t unrolled = unrolled_rows(reds, full_now, full_later);
  const Shape lead(rs_.kept.begin(), rs_.kept.end() - ptrdiff_t(unrolled));
  const Shape trail(rs_.kept.end() - ptrdiff_t(unrolled), rs_.kept.end());
  const int64_t unroll = kiln::numel(trail);
  kb_.kernel().range = rs_.rows / unroll;
  const ValueId r = kb_.index(0);
  kb_.set_upper_bound(r, rs_.rows / unroll);
  // Per unrolled row u: its index, its kept coordinates and its row_prefix.
  struct Row {
    ValueId row;
    std::vector<ValueId> dims;
    ValueId base;
  };
  std::vector<Row> rows;
  const std::vector<ValueId> lead_dims = delinearize(r, lead);
  for (int64_t u = 0; u < unroll; ++u) {
    row_ = unroll == 1 ? r
                       : kb_.binary(ScalarOp::add, kb_.binary(ScalarOp::mul, r, kb_.iconst(unroll)),
                                    kb_.iconst(u));
    row_dims_ = lead_dims;
    for (int64_t i = int64_t(trail.size()), rest = u; i-- > 0; rest /= trail[size_t(i)])
      row_dims_.insert(row_dims_.begin() + ptrdiff_t(lead.size()),
                       kb_.iconst(rest % trail[size_t(i)]));
    rs_.row_base = kNoValue;
    row_prefix();
    rows.push_back({row_, row_dims_, rs_.row_base});
  }
  auto use_row = [&](int64_t u) {
    row_ = rows[size_t(u)].row;
    row_dims_ = rows[size_t(u)].dims;
    rs_.row_base = rows[size_t(u)].base;
  };
  last_reduced_block();
  auto store_full = [&](const std::vector<std::pair<Value, int32_t>>& list, Coords& c) {
    std::vector<ValueId> vals;
    for (const auto& [v, b] : list) vals.push_back(eval(v, c));
    for (size_t i = 0; i < list.size(); ++i) kb_.store(list[i].second, linear(c), vals[i]);
  };
  std::vector<std::vector<int32_t>> accs(reds.size());
  for (size_t i = 0; i < reds.size(); ++i) {
    const Node& n = g_.node(reds[i]);
    const DType in_t = g_.type(n.operands[0]).dtype, out_t = n.type().dtype;
    if (op_info(n.op).identity == Identity::none) fail("unknown reduction ", op_name(n.op));
    // An argreduce folds the input's values; the others fold in the result's type,
    // except that a sum (a reassociated add) of up to 64K elements stays in its
    // own type (the vectorized loop keeps many partial sums, so the error stays
    // ~1e-6 relative), longer sums go through f64 as the reference kernels do,
    // and integer sums through i64.
    DType acc_t = is_arg_reduce(n.op) ? in_t : out_t;
    if (op_info(n.op).combine == OpKind::add)
      acc_t = !is_floating(out_t) ? DType::i64 : rs_.extent <= 65536 ? out_t : DType::f64;
    for (int64_t u = 0; u < unroll; ++u) {
      accs[i].push_back(kb_.add_accumulator(n.op, acc_t));
      kb_.acc_init(accs[i].back());
    }
    const bool nested = !rs_.red_last.empty();
    const int64_t last = nested ? kiln::numel(rs_.red_last) : 1;
    // The body at reduced position j (flat) or jo, ji (nested).
    auto body = [&](ValueId jo, ValueId ji, ValueId j) {
      for (int64_t u = 0; u < unroll; ++u) {
        use_row(u);
        Coords c = nested ? row_coords(jo, ji) : row_coords(j);
        if (nested && is_arg_reduce(n.op) && j == kNoValue)
          j = kb_.binary(ScalarOp::add, kb_.binary(ScalarOp::mul, jo, kb_.iconst(last)), ji);
        const ValueId operand = eval(n.operands[0], c);
        kb_.acc_update(accs[i][size_t(u)], kb_.cast(operand, acc_t),
                       is_arg_reduce(n.op) ? j : kNoValue);
        if (i == 0) store_full(full_now, c);
        if (keep[i] >= 0) kb_.store(keep[i], linear(c), operand);
      }
    };
    if (nested) {
      // The last block's loop (an image's plane) in the segments between its
      // cuts (loop_segments), its pads' reads unclamped where proven in bounds.
      const ValueId jo = kb_.index(kb_.begin_loop(rs_.extent / last));
      const std::vector<int64_t> cuts =
          cuts_.empty() || cuts_[0].empty() ? std::vector<int64_t>{0, last} : cuts_[0];
      cut_extents_ = {last};
      loop_j_.assign(1, kNoValue);
      pad_edges_.assign(1, {});
      const bool unclamped = std::exchange(unclamped_pads_, true);
      plane_ = true;
      for (size_t s = 0; s + 1 < cuts.size(); ++s) {
        const ValueId ji = kb_.binary(
            ScalarOp::add, kb_.index(kb_.begin_loop(cuts[s + 1] - cuts[s])), kb_.iconst(cuts[s]));
        loop_j_[0] = ji;
        body(jo, ji, kNoValue);
        kb_.end_loop();
      }
      loop_j_[0] = kNoValue;
      unclamped_pads_ = unclamped;
    } else {
      body(kNoValue, kNoValue, reduced_index(kb_.begin_loop(rs_.extent)));
    }
    kb_.end_loop();
    red_acc_[reds[i]] = accs[i][0];
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
  for (int64_t u = 0; u < unroll; ++u) {
    use_row(u);
    for (size_t i = 0; i < reds.size(); ++i) red_acc_[reds[i]] = accs[i][size_t(u)];
    std::vector<ValueId> vals;
    for (const auto& [v, b] : row_outs) {
      Coords c;
      c.shape = g_.type(v).shape;
      c.linear = row_;
      vals.push_back(eval(v, c));
    }
    for (size_t i = 0; i < row_outs.size(); ++i) kb_.store(row_outs[i].second, row_, vals[i]);
  }
}

size_t Lowering::unrolled_rows(const std::vector<NodeId>& reds,
                               const std::vector<std::pair<Value, int32_t>>& full_now,
                               const std::vector<std::pair<Value, int32_t>>& full_later) const {
  constexpr int64_t kMaxUnroll = 16;
  if (reds.size() != 1 || !full_now.empty() || !full_later.empty() ||
      is_arg_reduce(g_.node(reds[0]).op))
    return 0;
  bool windows = false;
  for (NodeId id : grp_.nodes) {
    const Node& n = g_.node(id);
    windows =
        windows || (n.op == OpKind::unfold && n.type().numel() > g_.type(n.operands[0]).numel());
  }
  if (!windows) return 0;
  size_t dims = 0;
  int64_t unroll = 1;
  while (dims < rs_.kept.size() && unroll * rs_.kept[rs_.kept.size() - 1 - dims] <= kMaxUnroll)
    unroll *= rs_.kept[rs_.kept.size() - 1 - dims++];
  return unroll >= 2 ? dims : 0;
}

bool Lowering::lower_column_reduction(const std::vector<Value>& outs,
                                      const std::vector<NodeId>& reds,
                                      const std::vector<int64_t>& rdims) {
  // The reduction's result, and full-size outputs that do not read it (a
  // logits' gradient that is also summed for the bias), stored as they are made.
  if (reds.size() != 1 || std::count(outs.begin(), outs.end(), Value(reds[0])) != 1) return false;
  // Row-sized outputs computed from the result (a squared norm's square) come
  // after the rows are folded, reading the result back from its buffer.
  std::vector<Value> full, per_column;
  for (Value v : outs) {
    if (v == Value(reds[0])) continue;
    const bool reads_result = reaches(v.node, [&](NodeId id) { return id == reds[0]; });
    if (g_.type(v).shape == rs_.in_shape && !reads_result)
      full.push_back(v);
    else if (kiln::numel(g_.type(v).shape) == rs_.rows && g_.type(v).shape != rs_.in_shape)
      per_column.push_back(v);
    else
      return false;
  }
  const Node& n = g_.node(reds[0]);
  const DType t = n.type().dtype;
  const OpKind combine = op_info(n.op).combine;
  if (is_arg_reduce(n.op) || !is_floating(t)) return false;
  // The reduced dims are one block: after it the kept columns (a bias's
  // gradient: a sum over the batch), before it kept dims that number
  // independent column sums (split_column_sums' chunks of rows).
  if (rdims.empty()) return false;
  for (size_t i = 0; i < rdims.size(); ++i)
    if (rdims[i] != rdims[0] + int64_t(i)) return false;
  int64_t sums = 1;
  for (int64_t d = 0; d < rdims[0]; ++d) sums *= rs_.in_shape[size_t(d)];
  if (sums == 0) return false;
  const int64_t inner = rs_.rows / sums, extent = rs_.extent;
  // A long sum would fold in f64 (as the row form does); rows of few columns
  // are as well served one element per iteration.
  if (inner < 16 || extent < 2 || (combine == OpKind::add && extent > 65536)) return false;
  // Blocks of the largest divisor of the columns in [8, 256]; when none divides
  // them (a prime count), blocks of 128 with the last one's spare columns
  // skipped by a guard. With several sums, blocks of up to 4096 columns (whole
  // rows, as a rule): the sums keep the threads busy, and a block is read as
  // runs of whole rows, which the prefetcher follows.
  const int64_t widest = sums > 1 ? 4096 : 256;
  int64_t block = 0;
  for (int64_t b = std::min<int64_t>(widest, inner); b >= 8 && block == 0; --b)
    if (inner % b == 0) block = b;
  const bool ragged = block == 0;
  if (ragged) block = 128;

  int32_t ob = -1;
  std::vector<int32_t> full_bufs, column_bufs;
  for (Value v : outs) {
    const bool is_full = std::find(full.begin(), full.end(), v) != full.end();
    (v == Value(reds[0]) ? ob
     : is_full           ? full_bufs.emplace_back()
                         : column_bufs.emplace_back()) = add_output(v);
  }
  kir::Kernel& kernel = kb_.kernel();
  const int64_t blocks = (inner + block - 1) / block;
  kernel.range = sums * blocks;
  const ValueId i0 = kb_.index(0);
  kb_.set_upper_bound(i0, kernel.range);
  // Outer iteration i0 is block i0 % blocks of sum i0 / blocks: its columns
  // start at `first` (counted in the sum), its outputs at `out0` + first, its
  // input rows at `in0` + row * inner + first.
  // (With one sum, i0 < blocks: the division folds to 0 and the remainder to i0.)
  const ValueId sum = kb_.binary(ScalarOp::idiv, i0, kb_.iconst(blocks));
  const ValueId first = kb_.binary(
      ScalarOp::mul, kb_.binary(ScalarOp::imod, i0, kb_.iconst(blocks)), kb_.iconst(block));
  const ValueId out0 = kb_.binary(ScalarOp::mul, sum, kb_.iconst(inner));
  const ValueId in0 = kb_.binary(ScalarOp::mul, sum, kb_.iconst(inner * extent));
  const kir::Immediate id_v = kir::identity_of(n.op, t);
  const ScalarOp fold = kir::combine_of(n.op);
  // A loop over the block's columns (inside the guard when ragged); the column.
  auto begin_columns = [&] {
    const ValueId col = kb_.binary(ScalarOp::add, first, kb_.index(kb_.begin_loop(block)));
    if (ragged) kb_.begin_if(kb_.binary(ScalarOp::lt, col, kb_.iconst(inner)));
    return col;
  };
  auto output_at = [&](ValueId col) { return kb_.binary(ScalarOp::add, out0, col); };
  auto end_columns = [&] {
    if (ragged) kb_.end_if();
    kb_.end_loop();
  };
  {  // the block starts at the identity
    const ValueId col = begin_columns();
    kb_.store(ob, output_at(col), kb_.constant(t, id_v.f));
    end_columns();
  }
  // then each row's run of the block's columns is folded in, in row order
  const ValueId r = kb_.index(kb_.begin_loop(extent));
  const ValueId row_start =
      kb_.binary(ScalarOp::add, in0, kb_.binary(ScalarOp::mul, r, kb_.iconst(inner)));
  const ValueId col = begin_columns();
  const ValueId at = output_at(col);
  Coords c;
  c.shape = rs_.in_shape;
  c.linear = kb_.binary(ScalarOp::add, row_start, col);
  const ValueId x = kb_.cast(eval(n.operands[0], c), t);
  std::vector<ValueId> vals;
  for (Value v : full) vals.push_back(eval(v, c));
  for (size_t i = 0; i < full.size(); ++i) kb_.store(full_bufs[i], linear(c), vals[i]);
  kb_.store(ob, at, kb_.binary(fold, kb_.load(ob, at), x));
  end_columns();
  kb_.end_loop();
  if (!per_column.empty()) {
    in_buf_[Value(reds[0])] = ob;  // the result, read back like an input
    const ValueId at = output_at(begin_columns());
    std::vector<ValueId> vals;
    for (Value v : per_column) {
      Coords rc;
      rc.shape = g_.type(v).shape;
      rc.linear = at;
      vals.push_back(eval(v, rc));
    }
    for (size_t i = 0; i < per_column.size(); ++i) kb_.store(column_bufs[i], at, vals[i]);
    end_columns();
  }
  return true;
}

std::vector<int32_t> Lowering::kept_operands(
    const std::vector<NodeId>& reds, const std::vector<std::pair<Value, int32_t>>& full_later) {
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

}  // namespace kiln::lowering
