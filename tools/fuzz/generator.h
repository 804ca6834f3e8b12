// The program generator's state and its parts (internal to tools/fuzz). It
// tracks, per value, the shape, a bound on |value| (so that exp, products and
// sums stay finite and comparisons between eager and traced are meaningful)
// and which values share storage (views, detach, in-place results), so that
// in-place updates are legal. Each group of instructions is drawn by its own
// member function, defined in the file named beside it; program.h's generate()
// is the entry point.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ir/shape.h"
#include "tools/fuzz/program.h"

namespace kiln::fuzz {

constexpr int64_t kMaxNumel = 256;
constexpr double kMaxBound = 1e3;

/// What the generator knows of one value of the program.
struct ValueInfo {
  Shape shape;
  bool is_bool = false;
  bool marker = false;  // a nograd marker: not a value
  double bound = 2;
  int group = 0;         // values that may share storage
  bool overlap = false;  // derived from expand: elements alias each other
  bool requires_grad = false;
  std::optional<double> value;  // every element's value by PyTorch's rule, until pushed
};

/// `s` reduced along dim d: kept as 1 (keepdim) or removed.
inline Shape reduced_shape(Shape s, int64_t d, bool keep) {
  if (keep)
    s[static_cast<size_t>(d)] = 1;
  else
    s.erase(s.begin() + d);
  return s;
}

/// a.matmul(b)'s shape, or nullopt when the two do not multiply.
std::optional<Shape> matmul_shape(const Shape& a, const Shape& b);

class Generator {
 public:
  Generator(uint64_t seed, uint32_t features) : r_(seed), f_(features) {}
  Program run();

 private:
  // generate.cpp: inputs, value bookkeeping, elementwise ops, detach, in-place
  // writes, outputs.
  bool has(Feature f) const { return (f_ & f) != 0; }
  Shape random_shape();
  void make_inputs();
  /// A random value (recent ones more likely) that satisfies `ok`, or -1.
  int pick(const std::function<bool(const ValueInfo&)>& ok);
  int pick_float() {
    return pick([](const ValueInfo& v) { return !v.is_bool; });
  }
  int pick_broadcastable(const Shape& s);
  const ValueInfo& val(int i) const { return vals_[static_cast<size_t>(i)]; }
  int64_t dim_of(int a) { return r_.below(static_cast<int64_t>(val(a).shape.size())); }
  /// A dim as written by the user: sometimes negative.
  int64_t spelled(int64_t d, size_t rank) {
    return r_.chance(0.3) ? d - static_cast<int64_t>(rank) : d;
  }
  bool recorded(int group) const;
  /// Appends an instruction and its result. Tracks requires_grad and which
  /// storage the autograd tape saved: eager backward rejects in-place writes to it.
  void push(Instr in, ValueInfo v);
  void marker(Op op);
  ValueInfo fresh(Shape s, double bound, bool is_bool = false);
  /// fresh() for a result whose every element PyTorch defines as `value` (a sum
  /// over an empty dim is 0, a mean NaN): checked on the eager run.
  ValueInfo fresh_known(Shape s, double value);
  /// Whether to draw an empty case (an empty index tensor, slice or piece)
  /// where a non-empty one would do: only with the zero-size feature.
  bool draw_empty(double p = 0.1) { return has(kZeroSize) && r_.chance(p); }
  /// A call PyTorch refuses on an empty tensor (a max over an empty dim): now
  /// and then the program's last call (Instr::throws); false when not drawn.
  bool raise(Instr in);
  ValueInfo view_of(int a, Shape s);
  void step();
  bool unary();
  /// A math op of the table (math_ops_drawn) on `a`, and on b when it has two
  /// operands: each taken into the op's domain first (instr.h, MathForm).
  bool math(int a, int b = -1);
  bool binary();
  bool compare();
  bool detach();
  bool in_place();
  void pick_outputs();

  // generate_reduction.cpp: reductions, softmax, scans, sort and index_select.
  bool reduction();

  // generate_movement.cpp: views and clone.
  Shape reshape_target(int64_t n);
  bool movement();

  // generate_linalg.cpp: matmul, attention, adaptive softmax.
  bool matmul();
  /// scaled_dot_product_attention(q [.., L, E], k [.., S, E], v [.., S, Ev]),
  /// leading dims broadcasting: causal or not, the default scale or one given,
  /// and sometimes k and v narrowed along S (two views) so that S != L.
  bool attention();
  /// An adaptive softmax over a [N, E] (E >= 2: a head of E - 1 shortlist
  /// classes and one cluster) with one cluster of R classes projected by b
  /// [R, E] (a itself qualifies); targets in the shortlist, in the cluster, or
  /// all in one of them. Weights through tanh keep the logits within E |a| R.
  bool adaptive();
  /// baddbmm(c, a, b) for a value a [B, n, k]: b [B, k, m] a value of that
  /// shape, or one [B, m, k] transposed (a itself qualifies); c broadcast to [B, n, m].
  bool baddbmm();

  // generate_index.cpp: advanced indexing and its index tensors.
  /// The broadcast shape of a set of index tensors: 0 to 2 dims of 1 to 3, one
  /// of them 0 when `empty` (then at least one dim).
  Shape index_shape(bool empty = false);
  /// Appends an index tensor's payload (rank, sizes, values) for a dim of `size`:
  /// mostly of shape b, else a suffix of b with some dims 1 (they broadcast to
  /// b); values in [-size, size). Returns its shape.
  Shape index_payload(std::vector<int64_t>& ints, const Shape& b, int64_t size);
  /// x.index({...}) over a prefix of a's dims: 1 to 3 index tensors (picked dims
  /// adjacent or not), integers, full and partial slices; the result's shape by
  /// PyTorch's rule (integers select first; the index tensors' shape B where the
  /// first picked dim was when the picked dims are adjacent, else in front).
  bool advanced_index();

  // generate_composite.cpp: libtorch's tensor functions (frontend/tensor_extra.h).
  /// `count` different dims of a tensor of `rank`, in random order.
  std::vector<int64_t> some_dims(size_t rank, size_t count);
  /// One of libtorch's tensor functions on values that suit it; false when none do.
  bool composite();

  // generate_join.cpp: functions of several tensors.
  /// cat, block_diag, meshgrid, cartesian_prod (a among the operands) or
  /// combinations of a, with empty pieces where the zero-size feature allows.
  bool join(int a);

  Rng r_;
  uint32_t f_;
  Program p_;
  std::vector<ValueInfo> vals_;
  std::vector<int> rg_groups_;           // storage of inputs that require grad
  std::vector<int> recorded_;            // storage saved by the tape
  std::vector<int> read_;                // storage read by differentiable ops with grad on
  std::vector<int> written_;             // storage written in place
  bool captured_takes_history_ = false;  // a captured tensor is given a value requiring grad
  int next_group_ = 0;
  bool nograd_ = false;
  bool ended_ = false;  // a call PyTorch refuses was drawn: nothing runs after it
};

}  // namespace kiln::fuzz
