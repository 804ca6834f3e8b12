// Elementwise, copy and matmul-epilogue kernels (see lower.h): one loop over
// the output's elements, flat on the linear index or rows x contiguous inner
// loops over the last dim (one loop, or several where reshapes split that dim).
#include "codegen/lowering.h"

#include <algorithm>

namespace kiln::lowering {

void Lowering::lower_map() {
  const std::vector<Value> outs = setup_buffers();
  if (outs.empty()) return;  // a lone matmul: nothing to compute
  Shape space = g_.type(outs[0]).shape;
  for (Value v : outs)
    if (g_.type(v).numel() > kiln::numel(space)) space = g_.type(v).shape;
  if (!space_.empty()) {
    if (mode_ != Mode::rows || kiln::numel(space_) != kiln::numel(space))
      fail("the iteration space ", shape_str(space_), " is not the rows of ", shape_str(space));
    space = space_;
  }
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

  Coords base;
  base.shape = space;
  const ValueId i0 = kb_.index(0);
  // The outputs' values at `base` (whose coordinates the caller has set),
  // stored last, after every load (so an in-place output never feeds a later read).
  auto emit = [&] {
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
  };
  if (mode_ == Mode::flat) {
    kb_.kernel().range = n;
    kb_.set_upper_bound(i0, n);
    base.linear = i0;
    emit();
    return;
  }
  const int64_t e = space.back();
  if (inner_loops_.empty()) inner_loops_ = split_last_dim(space);
  if (kiln::numel(inner_loops_) != e)
    fail("inner loops ", shape_str(inner_loops_), " do not cover the last dim ", e);
  kb_.kernel().range = n / e;
  kb_.set_upper_bound(i0, n / e);
  const Shape rows(space.begin(), space.end() - 1);
  std::vector<ValueId> rd = delinearize(i0, rows);
  // One loop per piece of the last dim, outer to inner, each once or as
  // segments [cuts[s], cuts[s+1]) (see loop_segments) over its own positions
  // j + cuts[s], every segment holding the loops inside it. The linear index is
  // in Horner form over (row, pieces...), which reshapes take apart by folding.
  const size_t levels = inner_loops_.size();
  cut_extents_ = inner_loops_;
  loop_j_.assign(levels, kNoValue);
  pad_edges_.assign(levels, {});
  auto nest = [&](auto& self, size_t l, ValueId lin, ValueId last) -> void {
    const int64_t piece = inner_loops_[l];
    const ValueId lin_base = kb_.binary(ScalarOp::mul, lin, kb_.iconst(piece));
    const ValueId last_base =
        last == kNoValue ? kNoValue : kb_.binary(ScalarOp::mul, last, kb_.iconst(piece));
    const bool innermost = l + 1 == levels;
    const bool whole = l >= cuts_.size() || cuts_[l].empty();
    const std::vector<int64_t> cuts = whole ? std::vector<int64_t>{0, piece} : cuts_[l];
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      ValueId j = kb_.index(kb_.begin_loop(cuts[s + 1] - cuts[s]));
      if (innermost || !whole) j = kb_.binary(ScalarOp::add, j, kb_.iconst(cuts[s]));
      loop_j_[l] = j;
      const ValueId lin_j = kb_.binary(ScalarOp::add, lin_base, j);
      const ValueId last_j = last == kNoValue ? j : kb_.binary(ScalarOp::add, last_base, j);
      if (innermost) {
        base.linear = lin_j;
        base.dims = rd;
        base.dims.push_back(last_j);
        emit();
      } else {
        self(self, l + 1, lin_j, last_j);
      }
      kb_.end_loop();
    }
    loop_j_[l] = kNoValue;
  };
  nest(nest, 0, i0, kNoValue);
}

std::vector<std::vector<int64_t>> Lowering::loop_segments() const {
  // Per loop: its cuts, every edge inside it; one more segment than cuts.
  std::vector<std::vector<int64_t>> all(pad_edges_.size());
  size_t bodies = 1;
  bool any = false;
  for (size_t l = 0; l < pad_edges_.size(); ++l) {
    const int64_t e = cut_extents_.at(l);
    std::vector<int64_t> cuts{0, e};
    if (l < cuts_.size()) cuts.insert(cuts.end(), cuts_[l].begin(), cuts_[l].end());
    for (int64_t p : pad_edges_[l])
      if (p > 0 && p < e) cuts.push_back(p);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    if (cuts.size() == 2) continue;
    all[l] = std::move(cuts);
    bodies *= all[l].size() - 1;
    any = true;
  }
  if (!any) return {};
  // Many edges (a wide kernel's taps): only a loop's longest segment is split
  // off (three segments at most), the outer loops' first, while there are more
  // than kMaxBodies loop bodies. A loop over an image's plane (a reduction's,
  // the plane form's) takes up to kMaxPlaneSegments: a 3x3 tap's first and last rows cut at
  // their columns' edges (where the rows are short enough that the column
  // guards fold), the rows between at the plane's reads' ends.
  constexpr size_t kMaxSegments = 7, kMaxBodies = 21, kMaxPlaneSegments = 9;
  const size_t max_segments = plane_ ? kMaxPlaneSegments : kMaxSegments;
  for (size_t l = 0; l < all.size(); ++l) {
    std::vector<int64_t>& cuts = all[l];
    if (cuts.empty()) continue;
    const size_t n = cuts.size() - 1;
    if (n <= 3 || (n <= max_segments && bodies <= kMaxBodies)) continue;
    size_t best = 0;
    for (size_t s = 1; s < n; ++s)
      if (cuts[s + 1] - cuts[s] > cuts[best + 1] - cuts[best]) best = s;
    const int64_t e = cuts.back();
    std::vector<int64_t> three{0};
    if (cuts[best] > 0) three.push_back(cuts[best]);
    if (cuts[best + 1] < e) three.push_back(cuts[best + 1]);
    three.push_back(e);
    bodies = bodies / n * (three.size() - 1);
    cuts = std::move(three);
  }
  return all;
}

std::vector<int64_t> Lowering::split_last_dim(const Shape& space) const {
  const int64_t e = space.back(), n = kiln::numel(space);
  // Cut points: the element counts of trailing blocks, 1 < cut < e; the loops are
  // the ratios of consecutive cuts, so each cut must divide the next.
  std::vector<int64_t> cuts{1, e};
  auto compatible = [&](int64_t p) {
    for (int64_t c : cuts)
      if (c % p != 0 && p % c != 0) return false;
    return true;
  };
  for (NodeId id : grp_.nodes) {
    const Node& nd = g_.node(id);
    if (nd.op != OpKind::reshape) continue;
    for (const Shape* s : {&g_.type(nd.operands[0]).shape, &nd.type().shape}) {
      if (kiln::numel(*s) != n) continue;
      int64_t p = 1;
      for (auto d = s->rbegin(); d != s->rend(); ++d) {
        p *= *d;
        if (p >= e) break;
        // The innermost loop stays long enough to vectorise.
        if (p >= kMinInnerExtent && e % p == 0 && compatible(p)) cuts.push_back(p);
      }
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<int64_t> loops;
  for (size_t i = cuts.size() - 1; i > 0; --i) loops.push_back(cuts[i] / cuts[i - 1]);
  return loops;
}

std::vector<Shape> merged_spaces_of(const Graph& g, const FusionGroup& grp, const Shape& out) {
  std::vector<Shape> spaces;
  if (out.size() < 2) return spaces;
  const int64_t n = kiln::numel(out);
  for (NodeId id : grp.nodes) {
    const Node& nd = g.node(id);
    if (nd.op != OpKind::reshape) continue;
    for (const Shape* s : {&g.type(nd.operands[0]).shape, &nd.type().shape}) {
      if (kiln::numel(*s) != n || s->empty() || s->back() <= out.back()) continue;
      int64_t p = 1;
      size_t first = out.size();
      while (first > 0 && p < s->back()) p *= out[--first];
      if (p != s->back() || first + 1 >= out.size()) continue;
      Shape space(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(first));
      space.push_back(p);
      if (std::find(spaces.begin(), spaces.end(), space) == spaces.end()) spaces.push_back(space);
    }
  }
  return spaces;
}

std::vector<std::vector<int64_t>> dim_runs_of(const Graph& g, const FusionGroup& grp, int64_t n,
                                              int64_t e) {
  std::vector<std::vector<int64_t>> runs;
  for (NodeId id : grp.nodes) {
    const Node& nd = g.node(id);
    if (nd.op != OpKind::reshape) continue;
    for (const Shape* s : {&g.type(nd.operands[0]).shape, &nd.type().shape}) {
      if (kiln::numel(*s) != n) continue;
      for (size_t last = 0; last < s->size(); ++last) {
        int64_t p = 1;
        size_t first = last + 1;
        while (first > 0 && p < e) p *= (*s)[--first];
        if (p != e || first == last) continue;
        std::vector<int64_t> run;
        for (size_t d = first; d <= last; ++d)
          if ((*s)[d] > 1) run.push_back((*s)[d]);
        if (run.size() > 1 && std::find(runs.begin(), runs.end(), run) == runs.end())
          runs.push_back(run);
      }
    }
  }
  return runs;
}

}  // namespace kiln::lowering
