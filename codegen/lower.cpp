// Lowering of fusion groups to the kernel IR (see lower.h for the loop shapes,
// lowering.h for how the files divide the work): the driver. A group lowers
// in the flat mode first; per-element divisions send it to the rows mode.
#include "codegen/lower.h"

#include <algorithm>

#include "codegen/lowering.h"

namespace kiln {
namespace lowering {

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

void Lowering::add_input(Value v) {
  if (in_buf_.count(v)) return;
  kir::Buffer b;
  b.dtype = g_.type(v).dtype;
  b.shape = g_.type(v).shape;
  b.value = v;
  in_buf_[v] = kb_.add_buffer(b);
}

int32_t Lowering::add_output(Value v) {
  kir::Buffer b;
  b.dtype = g_.type(v).dtype;
  b.shape = g_.type(v).shape;
  b.output = true;
  b.value = v;
  return kb_.add_buffer(b);
}

std::vector<Value> Lowering::setup_buffers() {
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

}  // namespace lowering

namespace {

using namespace lowering;

// What lower_cut says of its lowering: whether a loop was cut, whether a loop
// outside the innermost was, and how many pad reads its last run left clamped
// (Lowering::clamped_reads).
struct CutInfo {
  bool split = false, outer_split = false;
  int clamped = 0;
};

// A lowering whose loops are cut where its pads' guards change
// (Lowering::loop_segments). Rows are cut once. A plane's loop (a reduction's,
// or the rows mode's plane form, `plane`: Lowering::read_pads_unclamped) is
// cut again at the cuts its segments add, where unclamped reads come into
// bounds, until they settle (three rounds at most).
kir::Kernel lower_cut(const Graph& g, const FusionGroup& group, const LowerOptions& opts, Mode mode,
                      std::vector<int64_t> loops = {}, Shape space = {}, bool plane = false,
                      CutInfo* info = nullptr) {
  CutInfo local;
  CutInfo& out = info ? *info : local;
  auto run = [&](const std::vector<std::vector<int64_t>>& cuts,
                 std::vector<std::vector<int64_t>>* next) {
    Lowering l(g, group, opts, mode, loops, space);
    if (plane) l.read_pads_unclamped();
    l.split_loops(cuts);
    kir::Kernel k = l.run();
    *next = l.loop_segments();
    out.clamped = l.clamped_reads();
    return k;
  };
  std::vector<std::vector<int64_t>> cuts, next;
  kir::Kernel k = run({}, &cuts);
  out.split = !cuts.empty();
  out.outer_split = cuts.size() > 1 && std::any_of(cuts.begin(), cuts.end() - 1,
                                                   [](const auto& c) { return !c.empty(); });
  const int rounds = plane || mode == Mode::flat ? 3 : 1;
  for (int round = 0; round < rounds && !cuts.empty(); ++round) {
    k = run(cuts, &next);
    if (next == cuts) break;
    cuts = std::move(next);
  }
  return k;
}

kir::Kernel lower_in_mode(const Graph& g, const FusionGroup& group, const LowerOptions& opts) {
  // The loop over a reduction's last reduced block (an image's plane) cut at
  // its pads' edges, then again where its pads' unclamped reads come into
  // bounds in those segments.
  if (group.kind == GroupKind::Reduction) return lower_cut(g, group, opts, Mode::flat);
  Lowering flat(g, group, opts, Mode::flat);
  kir::Kernel k = flat.run();
  if (flat.delinearized() == 0 || k.buffers.empty()) return k;
  const kir::Buffer* widest = nullptr;
  for (const kir::Buffer& b : k.buffers)
    if (b.output && (!widest || b.numel() > widest->numel())) widest = &b;
  if (!widest || widest->shape.size() < 2 || widest->shape.back() < 2) return k;
  // Per-element divisions: split rows so the divisions happen once per row and the
  // inner loop is contiguous. Short rows too: a [64,1,10,10] pad divides by 10
  // three times per element flat (about 10 cycles an element, scalar), and a
  // row of 10 with its coordinates computed once runs 5-8 times faster (bench_conv's
  // digits layers; a [4M, 4] broadcast is no slower). The last dim is split where a
  // reshape splits it (split_last_dim), unless one loop over it, or the dims of a
  // reshape that multiply to it (pieces a permute moved: a conv weight gradient's
  // patches), divide less often.
  auto divisions = [](const kir::Kernel& kk) {
    return kk.range * kir::divisions_per_iteration(kk);
  };
  CutInfo rows;
  kir::Kernel best = lower_cut(g, group, opts, Mode::rows, {}, {}, false, &rows);
  bool split = rows.split;
  int64_t least = divisions(best);
  const int64_t e = widest->shape.back();
  std::vector<std::vector<int64_t>> others;
  if (best.num_loops > 2) others.push_back({e});  // else the rows mode's loop already is
  for (std::vector<int64_t>& run : dim_runs_of(g, group, widest->numel(), e))
    others.push_back(std::move(run));
  for (std::vector<int64_t>& loops : others) {
    if (least == 0) break;
    CutInfo cut;
    kir::Kernel other = lower_cut(g, group, opts, Mode::rows, std::move(loops), {}, false, &cut);
    const int64_t d = divisions(other);
    if (d < least) best = std::move(other), least = d, split = cut.split;
  }
  // Longer rows where a reshape merges the output's trailing dims, one loop over
  // them, dividing as little or less: a bias added to a conv's [N, O, H'W'] product and written as
  // [N, O, H', W'] takes its channel apart once per H'W' elements, not once per
  // W', and its inner loop is H'W' long (bench_conv).
  if (group.kind != GroupKind::Elementwise && group.kind != GroupKind::Copy &&
      group.kind != GroupKind::Matmul)
    return best;
  std::vector<Shape> spaces = merged_spaces_of(g, group, widest->shape);
  // Rows cut at a pad's edges: also the image's rows and columns as loops of
  // their own (the output's last two dims merged), taken only where the pads'
  // guards cut the rows loop too (a depthwise conv's input gradient, whose
  // output no reshape merges), and where the images are enough rows to share
  // among threads (a batch of one RGB image stays in rows).
  constexpr int64_t kMinImages = 64;
  const size_t merged_images = spaces.size();
  int64_t images = 1;
  for (size_t d = 0; d + 2 < widest->shape.size(); ++d) images *= widest->shape[d];
  const bool image_form = split && widest->shape.size() >= 3 && images >= kMinImages;
  if (image_form) {
    Shape image(widest->shape.begin(), widest->shape.end() - 1);
    image.back() *= e;
    if (std::find(spaces.begin(), spaces.end(), image) == spaces.end()) spaces.push_back(image);
  }
  for (size_t i = 0; i < spaces.size(); ++i) {
    const int64_t merged = spaces[i].back();
    // Rows cut at a pad's edges keep their last dim as the innermost loop
    // (one merged loop would index the pad by a remainder, its reads guarded
    // again), inside a loop over the rest of the merged rows: a depthwise
    // conv's taps loop over an image's rows, its weights loaded once an image.
    std::vector<int64_t> loops{merged};
    if (split) loops = {merged / e, e};
    CutInfo cut;
    kir::Kernel other =
        lower_cut(g, group, opts, Mode::rows, loops, std::move(spaces[i]), false, &cut);
    if (split && !cut.split) continue;
    if (i >= merged_images && !cut.outer_split) continue;
    const int64_t d = divisions(other);
    if (d < least || (d == least && other.range < best.range)) best = std::move(other), least = d;
  }
  // The plane form, where the image form applies and its plane is at most
  // kMaxPlane positions and its rows a vector or more: one loop over each
  // image's plane (its rows' positions one after another), cut at its first
  // and last rows' edges and where its pads' unclamped reads come into
  // bounds, its column guards tables (Lowering::column_guard). Between the
  // cuts, every tap one contiguous load and a masked value, in a loop of
  // nearly the plane's length where the image form's rows are short loops
  // with their own edges. Measured in C (3x3 taps of 32x32 planes, one
  // thread, Zen 3): 0.5x the time of rows of 30 with the edges cut off.
  // Not where a pad's read stays clamped in a long segment (a patch
  // gradient's pads of slices, read per element at a selected index).
  constexpr int64_t kMaxPlane = 4096;
  const int64_t h = image_form ? widest->shape[widest->shape.size() - 2] : 0;
  if (image_form && e >= kMinInnerExtent && h * e <= kMaxPlane) {
    Shape plane(widest->shape.begin(), widest->shape.end() - 2);
    plane.push_back(h * e);
    CutInfo cut;
    kir::Kernel other = lower_cut(g, group, opts, Mode::rows, {h * e}, plane, true, &cut);
    if (cut.split && cut.clamped == 0 && divisions(other) <= least) best = std::move(other);
  }
  return best;
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
