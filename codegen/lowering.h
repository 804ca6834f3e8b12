// The lowering's machinery (see lower.h), shared by its files; private to codegen:
//   lower.cpp         the driver: buffers, the mode (flat or rows), lower_group
//   lower_index.cpp   coordinates and values: eval(value, coords), creation and movement ops
//   lower_reduce.cpp  reduction kernels: one loop per row, an accumulator per reduction
//   lower_map.cpp     elementwise, copy and matmul-epilogue kernels: one loop over the output
//   lower_ops.cpp     one elementwise op's scalar code, by its op-table rule
//
// The core is `eval(value, coords)`: the kernel IR value of a graph value at
// given coordinates of its own shape. Elementwise nodes evaluate their operands
// at the broadcast coordinates and apply one scalar op; movement nodes map the
// coordinates (reshape keeps the linear index, permute/expand/slice map dims,
// pad guards with a select); group inputs are loads; finished reductions are
// accumulator reads. Coordinates carry a linear index, per-dim values, or both,
// and convert lazily, so chains of same-shape elementwise ops never divide.
// Where a pad's guard depends on a rows-mode inner loop's position, that loop
// is cut at the guard's edges (loop_segments) and the guards fold in each piece.
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codegen/kernel_builder.h"
#include "codegen/lower.h"
#include "ir/error.h"

namespace kiln::lowering {

using kir::kNoValue;
using kir::ScalarOp;
using kir::ValueId;

// The shortest innermost loop a reshape's split of the last dim may leave.
constexpr int64_t kMinInnerExtent = 16;

struct Coords {
  Shape shape;
  std::vector<ValueId> dims;  // per-dim coordinates; empty until materialised
  ValueId linear = kNoValue;  // row-major linear index; kNoValue until materialised
  bool has_dims() const { return shape.empty() || !dims.empty(); }
};

// flat: one loop on the linear index; rows: rows x inner loops over the last dim
// (split_last_dim's, or the caller's).
enum class Mode { flat, rows };

inline bool is_reduce(OpKind k) {
  return op_info(k).category == OpCategory::Reduce;
}

inline bool is_arg_reduce(OpKind k) {
  return is_arg_reduction(k);
}

// The reduced dims of a reduction node, normalised and sorted.
std::vector<int64_t> reduced_dims(const Node& n, int64_t rank);

// Other inner loops for the rows mode over a last dim of size e: for each run of
// a reshape's dims (operand or result shape of a reshape in the group, of n
// elements) whose product is e, those dims as loops. The dims of the last dim
// wherever a permute has moved them (a conv weight gradient's patches: [C, kH, kW]).
std::vector<std::vector<int64_t>> dim_runs_of(const Graph& g, const FusionGroup& grp, int64_t n,
                                              int64_t e);

// Coarser iteration spaces for the rows mode over an output `out`: out's
// leading dims and, as one last dim, a run of its trailing dims whose product
// is the last dim of a reshape's operand or result in the group (of out's
// size), so the rows are longer and fewer. A conv's [N, O, H', W'] output
// computed as [N, O, H'W'] gives [N, O, H'W'].
std::vector<Shape> merged_spaces_of(const Graph& g, const FusionGroup& grp, const Shape& out);

// Lowers one group in one mode (lower_group picks the mode).
class Lowering {
 public:
  // `inner_loops`: the rows mode's inner loop extents, outer to inner (their
  // product the last dim); empty for split_last_dim's. `space`: the rows mode's
  // iteration space for an elementwise, copy or epilogue kernel, a shape of its
  // widest output's size (trailing dims merged: merged_spaces_of); empty for
  // that output's own shape.
  Lowering(const Graph& g, const FusionGroup& grp, const LowerOptions& opts, Mode mode,
           std::vector<int64_t> inner_loops = {}, Shape space = {})
      : g_(g),
        grp_(grp),
        opts_(opts),
        mode_(mode),
        kb_("kernel"),
        inner_loops_(std::move(inner_loops)),
        space_(std::move(space)) {
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
      case GroupKind::Scatter:
        lower_scatter();
        break;
      case GroupKind::Scan:
        lower_scan();
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

  // Where the rows mode's inner loops are best cut (after a run): at the
  // positions where a pad's guard on a dim that a loop walks changes value, so
  // that in each segment the guards fold (codegen/kernel_builder.h, range) and
  // the reads are plain loads at affine indices, which vectorise; a depthwise
  // conv's taps read its padded image this way without a copy of it, its
  // interior rows and columns with no guard at all. A reduction's loop over an
  // image's plane (a depthwise conv's weight gradient) is cut likewise, at its
  // rows' edges and where its taps' unclamped reads come into bounds. Per
  // inner loop, outer to inner, the cuts from 0 to its extent (the run's own
  // cuts among them), or empty where it stays whole; empty when no loop is cut.
  std::vector<std::vector<int64_t>> loop_segments() const;
  // Runs each inner loop in the segments between its `cuts` (loop_segments).
  void split_loops(std::vector<std::vector<int64_t>> cuts) { cuts_ = std::move(cuts); }
  // The rows mode's plane form (lower.cpp): its one inner loop runs over an
  // image's plane, its pads read unclamped where proven in bounds and its
  // column guards tables, as a reduction's plane loop does.
  void read_pads_unclamped() { unclamped_pads_ = plane_ = true; }
  // With unclamped pads: the pad reads that stayed clamped (not proven in
  // bounds, their guard not folded) in loop segments of kVectorSegment
  // positions or more: per element, a select of the index, which keeps the
  // loads from being contiguous (a conv's patch gradient padded after a slice:
  // its plane form 1.5-2.4x the time).
  int clamped_reads() const { return clamped_reads_; }
  static constexpr int64_t kVectorSegment = 8;

 private:
  template <class... A>
  [[noreturn]] void fail(const A&... a) {
    std::ostringstream os;
    os << "cannot lower ";
    os << group_kind_name(grp_.kind) << " group starting at %"
       << (grp_.nodes.empty() ? 0 : grp_.nodes[0]) << ": ";
    (os << ... << a);
    throw Error(os.str(), kiln::first_loc(g_, grp_));  // passes/fusion.h
  }

  // ---- Buffers ----

  void add_input(Value v);
  int32_t add_output(Value v);

  // Inputs, then outputs. Matmul groups read the matmul's result instead of its
  // operands, and only the inputs the epilogue uses.
  std::vector<Value> setup_buffers();

  // ---- Coordinates ----

  std::vector<ValueId> delinearize(ValueId lin, const Shape& s);

  // Horner form ((d0 * s1 + d1) * s2 + d2) ..., which the builder's folds invert
  // against delinearize exactly.
  ValueId linearize(const std::vector<ValueId>& d, const Shape& s);
  const std::vector<ValueId>& dims(Coords& c);
  ValueId linear(Coords& c);

  // Coordinates of an operand of shape `to` broadcast to c's shape.
  Coords broadcast(Coords& c, const Shape& to);

  // ---- Values ----

  std::string memo_key(Value v, Coords& c);
  ValueId eval(Value v, Coords& c);
  ValueId eval_uncached(Value v, Coords& c);
  ValueId creation(NodeId id, const Node& n, Coords& c);
  ValueId movement(const Node& n, Coords& c);
  // A pad's operand read at c (clamped into its span) and, in *valid, whether c
  // is inside the span; pad is select(valid, read, 0).
  ValueId pad_read(const Node& n, Coords& c, ValueId* valid);
  // With unclamped_pads_: whether reading `src` at `dims`, positions that may
  // lie outside a pad's span (so its guard hides them), reads in bounds, through
  // pads of one input: that input's element, its linear index (affine_index)
  // in [0, numel) by the builder's ranges. *at is that index. When it is not
  // proven but would be for loop positions in a narrower range, those range
  // ends are recorded as pad_edges_, so a cut lowering proves it there.
  bool unclamped_in_bounds(Value src, std::vector<ValueId> dims, ValueId* at);
  // A pad's guard low <= x < low + len where x is a column, (j % w) + k, of a
  // reduction's loop over an image's plane (position j): a table over the
  // loop's positions, loaded at j, so that the guard is one contiguous load
  // and a compare, not an index computed and compared per element (a depthwise
  // conv's weight gradient, its edge columns' taps: its plane loop 0.8x the
  // time, measured in C). kNoValue where x is not such a column.
  ValueId column_guard(ValueId x, int64_t low, int64_t len);
  // w when `terms` (a coordinate's, kb_.add_terms) are one `op` (idiv: the
  // row, imod: the column) of loop position j by a constant w; else 0.
  int64_t loop_divisor(const std::vector<ValueId>& terms, ScalarOp op, ValueId j) const;
  // The linear index of `dims` in shape `s` as a sum of terms times strides,
  // (q / k) * k s + (q % k) * s taken back to q * s: the plane position of a
  // reduction's loop over an image, read at a tap's offset, is that position
  // plus a constant, so its loads are consecutive. *loop_term gets the
  // coefficient-1 term that is a cut loop's position, if any (else kNoValue),
  // and *rest the sum without it.
  ValueId affine_index(const std::vector<ValueId>& dims, const Shape& s, ValueId* loop_term,
                       ValueId* rest);
  // An index value as a position in [0, size): cast to i64 and clamped (the
  // frontend has checked it; the clamp keeps an unchecked graph in bounds).
  ValueId checked_index(ValueId index, int64_t size);
  // gather's value at c: its data at c with coordinate `dim` from the indices.
  ValueId gather(const Node& n, Coords& c);
  // cat and stack: a sum of pads of one dim whose spans do not overlap reads one
  // piece per element, chosen by a select chain (the reads of one buffer then
  // merge into one load), instead of reading every piece and adding. kNoValue
  // when `n` is not such a sum.
  ValueId cat(const Node& n, Coords& c);
  bool cat_pieces(const Node& n, std::vector<const Node*>& pieces) const;

  // ---- Reductions ----

  struct RowSpace {
    Shape in_shape;
    std::vector<char> reduced;  // per dim of in_shape
    Shape kept, red;            // shapes of the kept and reduced dims
    int64_t rows = 1, extent = 1;
    int64_t inner = 1;            // elements after the reduced block
    ValueId row_base = kNoValue;  // see row_prefix
    Shape red_last;               // see last_reduced_block
  };

  ValueId reduction_result(NodeId id, const Node& n, Coords& c);

  // The part of the reduction input's linear index that depends on the row only,
  // when the reduced dims form one contiguous block (then the index is affine in
  // the reduced position j: row_base + j * inner). Built before the loops.
  void row_prefix();

  // The reduced position in `loop`: the constant 0 when the reduced dims hold one
  // element, so that index arithmetic folds and reads of the reduction's result
  // at the current row are recognised as such (softmax over a size-1 dim).
  ValueId reduced_index(int32_t loop);

  // Coordinates of the reduction input for the current row and reduced position j.
  Coords row_coords(ValueId j);

  // When the reduced dims are not one block but end the shape (a conv's bias
  // gradient, [N, C, H'W'] summed over N and H'W'), the dims of that last block:
  // the reduction loops over the other reduced dims, then over the block, so the
  // inner loop reads consecutive elements (one flat loop takes its position apart
  // by division and reads gathered elements). Empty otherwise.
  void last_reduced_block();
  // Coordinates for the position jo over the reduced dims before the last
  // block and ji within it.
  Coords row_coords(ValueId jo, ValueId ji);
  void lower_reduction();
  // How many of the last kept dims a reduction over overlapping windows
  // (unfold) folds at once: rows that differ only in those dims (a depthwise
  // conv's weight gradient, [C, kH, kW], its kH kW taps) read the same input
  // elements, so one pass over the reduced dims updates an accumulator per
  // row, each element read once from memory instead of once per row. At most
  // 16 rows; one reduction and no full-size outputs. 0 when rows are folded
  // one at a time.
  size_t unrolled_rows(const std::vector<NodeId>& reds,
                       const std::vector<std::pair<Value, int32_t>>& full_now,
                       const std::vector<std::pair<Value, int32_t>>& full_later) const;
  // The column form of LowerOptions::column_reductions when it applies (true).
  bool lower_column_reduction(const std::vector<Value>& outs, const std::vector<NodeId>& reds,
                              const std::vector<int64_t>& rdims);

  // Softmax's exp: a reduction's expensive operand that a later full-size output
  // uses again is stored by the reduction loop into that output's buffer (same
  // shape and dtype) and loaded back by the last loop, from cache, before it
  // overwrites the element. Per reduction: the output buffer keeping it, or -1.
  std::vector<int32_t> kept_operands(const std::vector<NodeId>& reds,
                                     const std::vector<std::pair<Value, int32_t>>& full_later);

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

  // ---- Scatter ----

  // scatter_add: the outer loop over output columns (positions outside `dim`,
  // the innermost of them in blocks of contiguous elements); each copies its
  // column of the base, then adds the sources in index order.
  void lower_scatter();

  // ---- Scans ----

  // cumsum, cumprod, logcumsumexp: the outer loop over lines along `dim` (in
  // blocks of contiguous lines); each element the combine of the previous one,
  // loaded back, and its input.
  void lower_scan();

  // ---- Elementwise, copy and matmul epilogue ----

  void lower_map();

  // The rows mode's inner loops, outer to inner, whose product is the last dim of
  // `space`: that dim split where a reshape of the group splits or merges it (so
  // reshapes fold instead of dividing per element), each split keeping the
  // innermost loop at least kMinInnerExtent long.
  std::vector<int64_t> split_last_dim(const Shape& space) const;

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
  std::vector<int64_t> inner_loops_;  // rows mode of lower_map: see split_last_dim
  Shape space_;                       // rows mode of lower_map: see the constructor
  std::vector<std::vector<int64_t>> cuts_;  // see split_loops
  std::vector<int64_t> cut_extents_;        // per loop that may be cut: its extent
  // A reduction's pads read their operands unclamped where the read is proven
  // in bounds (unclamped_in_bounds).
  bool unclamped_pads_ = false;
  bool plane_ = false;  // a loop over an image's plane is cut (see loop_segments)
  int clamped_reads_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t>, int32_t> guard_tables_;  // see column_guard
  // Per loop that may be cut (the rows mode's inner loops, outer to inner; a
  // reduction's loop over its last reduced block): its position while its body
  // is lowered (kNoValue outside), and the positions where a pad's guard on a
  // dim it walks changes (pad_read) or an unclamped read comes into bounds.
  std::vector<ValueId> loop_j_;
  std::vector<std::vector<int64_t>> pad_edges_;
  bool in_cat_ = false;  // pad_read for a piece of a cat
  int delinearized_ = 0;
};

}  // namespace kiln::lowering
