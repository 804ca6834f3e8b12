// The program generator: random but valid programs. It tracks, per value, the
// shape, a bound on |value| (so that exp, products and sums stay finite and
// comparisons between eager and traced are meaningful) and which values share
// storage (views, detach, in-place results), so that in-place updates are legal.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "ir/error.h"
#include "tools/fuzz/coverage.h"
#include "tools/fuzz/instr.h"
#include "tools/fuzz/program.h"

namespace kiln::fuzz {

namespace {

constexpr int64_t kMaxNumel = 256;
constexpr double kMaxBound = 1e3;

struct ValueInfo {
  Shape shape;
  bool is_bool = false;
  bool marker = false;  // a nograd marker: not a value
  double bound = 2;
  int group = 0;         // values that may share storage
  bool overlap = false;  // derived from expand: elements alias each other
  bool requires_grad = false;
};

std::optional<Shape> matmul_shape(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) return std::nullopt;
  Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a, b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  if (a2.back() != b2[b2.size() - 2]) return std::nullopt;
  Shape ba(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(ba, bb);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (a.size() > 1) batch.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) batch.push_back(b2.back());
  return batch;
}

class Generator {
 public:
  Generator(uint64_t seed, uint32_t features) : r_(seed), f_(features) {}

  Program run() {
    p_.dtype = has(kFloat32) && r_.chance(0.25) ? DType::f32 : DType::f64;
    std::vector<Mode> modes{Mode::no_grad};
    if (has(kBackwardOutside)) modes.insert(modes.end(), 3, Mode::backward_outside);
    if (has(kBackwardInside)) modes.insert(modes.end(), 3, Mode::backward_inside);
    p_.mode = modes[static_cast<size_t>(r_.below(static_cast<int64_t>(modes.size())))];
    make_inputs();
    const int64_t n = r_.range(2, 12);
    for (int64_t i = 0; i < n; ++i) step();
    if (nograd_) marker(Op::nograd_end);
    pick_outputs();
    if (p_.mode == Mode::backward_inside && has(kOptimizer) && r_.chance(0.3)) {
      bool any = std::any_of(p_.inputs.begin(), p_.inputs.end(),
                             [](const Input& in) { return in.captured && in.requires_grad; });
      // (A captured tensor given history by an in-place write sends later
      // calls' gradients through that history after the call: Kiln refuses
      // the optimizer's read of them, see check_history_grads_unread.)
      if (any && !captured_takes_history_)
        p_.optimizer = r_.chance(0.5) ? Optimizer::sgd : Optimizer::adam;
    }
    return p_;
  }

 private:
  bool has(Feature f) const { return (f_ & f) != 0; }

  Shape random_shape() {
    const int64_t rank = r_.range(1, 3);
    Shape s;
    for (int64_t i = 0; i < rank; ++i) s.push_back(r_.chance(0.25) ? 1 : r_.range(2, 5));
    return s;
  }

  void make_inputs() {
    // Shapes are suffixes of one base shape with some dims set to 1: they broadcast.
    Shape base = random_shape();
    const int64_t nargs = r_.range(0, 3);
    const int64_t ncaps = has(kCaptured) ? r_.range(0, 2) : 0;
    for (int64_t i = 0; i < std::max<int64_t>(nargs + ncaps, 1); ++i) {
      Input in;
      in.captured = i >= nargs && ncaps > 0;
      in.requires_grad = r_.chance(in.captured ? 0.85 : 0.6);
      const int64_t rank = r_.chance(0.1) ? 0 : r_.range(1, static_cast<int64_t>(base.size()));
      in.shape.assign(base.end() - rank, base.end());
      for (auto& d : in.shape)
        if (r_.chance(0.2)) d = 1;
      in.data_seed = r_.next();
      p_.inputs.push_back(in);
      ValueInfo v;
      v.shape = in.shape;
      v.group = next_group_++;
      v.requires_grad = in.requires_grad;
      if (in.requires_grad) rg_groups_.push_back(v.group);
      vals_.push_back(v);
    }
  }

  // A random value (recent ones more likely) that satisfies `ok`, or -1.
  int pick(const std::function<bool(const ValueInfo&)>& ok) {
    std::vector<int> c;
    for (size_t i = 0; i < vals_.size(); ++i)
      if (!vals_[i].marker && ok(vals_[i])) c.push_back(static_cast<int>(i));
    if (c.empty()) return -1;
    if (c.size() > 3 && r_.chance(0.5)) return c[c.size() - 1 - static_cast<size_t>(r_.below(3))];
    return c[static_cast<size_t>(r_.below(static_cast<int64_t>(c.size())))];
  }
  int pick_float() {
    return pick([](const ValueInfo& v) { return !v.is_bool; });
  }
  int pick_broadcastable(const Shape& s) {
    return pick([&](const ValueInfo& v) {
      if (v.is_bool) return false;
      try {
        return numel(broadcast_shapes(s, v.shape)) <= kMaxNumel;
      } catch (const Error&) {
        return false;
      }
    });
  }

  const ValueInfo& val(int i) const { return vals_[static_cast<size_t>(i)]; }
  int64_t dim_of(int a) { return r_.below(static_cast<int64_t>(val(a).shape.size())); }
  // A dim as written by the user: sometimes negative.
  int64_t spelled(int64_t d, size_t rank) {
    return r_.chance(0.3) ? d - static_cast<int64_t>(rank) : d;
  }

  bool recorded(int group) const {
    return std::find(recorded_.begin(), recorded_.end(), group) != recorded_.end();
  }

  // Appends an instruction and its result. Tracks requires_grad and which
  // storage the autograd tape saved: eager backward rejects in-place writes to it.
  void push(Instr in, ValueInfo v) {
    bool any_rg = false;
    for (int o : in.operands) any_rg = any_rg || val(o).requires_grad;
    const bool differentiable = in.op != Op::detach && in.op != Op::searchsorted &&
                                in.op != Op::bucketize && !v.is_bool;
    const bool rec = !nograd_ && any_rg && differentiable;
    const bool self = in.op == Op::add_ || in.op == Op::sub_ || in.op == Op::mul_ ||
                      in.op == Op::add_scalar_ || in.op == Op::mul_scalar_ || in.op == Op::relu_ ||
                      in.op == Op::index_put_;
    v.requires_grad = rec || (self && val(in.operands[0]).requires_grad);
    if (rec) {
      for (int o : in.operands) recorded_.push_back(val(o).group);
      recorded_.push_back(v.group);
    }
    if (!nograd_ && differentiable)
      for (int o : in.operands) read_.push_back(val(o).group);
    p_.instrs.push_back(std::move(in));
    vals_.push_back(std::move(v));
  }
  void marker(Op op) {
    ValueInfo v;
    v.marker = true;
    push(Instr{op, {}, {}, 0}, v);
    nograd_ = op == Op::nograd_begin;
  }
  ValueInfo fresh(Shape s, double bound, bool is_bool = false) {
    ValueInfo v;
    v.shape = std::move(s);
    v.bound = bound;
    v.is_bool = is_bool;
    v.group = next_group_++;
    return v;
  }
  ValueInfo view_of(int a, Shape s) {
    ValueInfo v = val(a);
    v.shape = std::move(s);
    return v;
  }

  void step() {
    if (has(kNoGrad) && r_.chance(0.08)) marker(nograd_ ? Op::nograd_end : Op::nograd_begin);
    for (int attempt = 0; attempt < 30; ++attempt) {
      const int64_t kind = r_.below(120);
      bool ok = kind >= 100 ? (kind < 105 ? has(kIndexing) && advanced_index()
                                          : has(kComposites) && composite())
                : kind < 30 ? unary()
                : kind < 50 ? binary()
                : kind < 58 ? (has(kCompare) && compare())
                : kind < 70 ? (has(kReductions) && reduction())
                : kind < 85 ? (has(kViews) && movement())
                : kind < 90 ? (has(kMatmul) && matmul())
                : kind < 94 ? (has(kDetach) && detach())
                            : (has(kInPlace) && in_place());
      if (ok) return;
    }
  }

  bool unary() {
    const int a = pick_float();
    if (a < 0) return false;
    if (r_.chance(0.5)) return math(a);
    static const Op ops[] = {Op::neg,        Op::abs,        Op::sign,       Op::relu,
                             Op::clamp,      Op::pow_scalar, Op::add_scalar, Op::mul_scalar,
                             Op::rsub_scalar, Op::div_scalar};
    const Op op = ops[r_.below(std::size(ops))];
    const double b = val(a).bound;
    static const double numbers[] = {0.5, 1.5, -0.75, 2.0, -2.0, 0.25};
    double x = numbers[r_.below(std::size(numbers))], nb = b;
    switch (op) {
      case Op::sign:
        nb = 1;
        break;
      case Op::clamp:
        x = std::abs(x);
        nb = std::min(b, x);
        break;
      case Op::pow_scalar:
        x = static_cast<double>(r_.range(2, 3));
        nb = std::pow(b, x);
        break;
      case Op::add_scalar:
      case Op::rsub_scalar:
        nb = b + std::abs(x);
        break;
      case Op::mul_scalar:
        nb = b * std::abs(x);
        break;
      case Op::div_scalar:
        nb = b / std::abs(x);
        break;
      default:
        break;
    }
    if (nb > kMaxBound) return false;
    push(Instr{op, {a}, {}, x}, fresh(val(a).shape, nb));
    return true;
  }

  // A math op of the table (math_ops_drawn) on `a`, and on b when it has two
  // operands: each taken into the op's domain first (instr.h, MathForm).
  bool math(int a, int b = -1) {
    const std::vector<OpKind>& ops = math_ops_drawn(b < 0 ? 1 : 2);
    if (ops.empty()) return false;
    const OpKind k = ops[static_cast<size_t>(r_.below(static_cast<int64_t>(ops.size())))];
    const double nb = math_form(k).bound;
    if (b < 0) {
      push(Instr{Op::math, {a}, {static_cast<int64_t>(k)}, 0}, fresh(val(a).shape, nb));
    } else {
      push(Instr{Op::math2, {a, b}, {static_cast<int64_t>(k)}, 0},
           fresh(broadcast_shapes(val(a).shape, val(b).shape), nb));
    }
    return true;
  }

  bool binary() {
    const int a = pick_float();
    if (a < 0) return false;
    const int b = pick_broadcastable(val(a).shape);
    if (b < 0) return false;
    if (r_.chance(0.25)) return math(a, b);
    static const Op ops[] = {Op::add,     Op::sub,     Op::mul,      Op::div_safe,
                             Op::maximum, Op::minimum, Op::pow_safe, Op::add_alpha};
    const Op op = ops[r_.below(std::size(ops))];
    const double ba = val(a).bound, bb = val(b).bound;
    double nb = ba + bb, x = r_.chance(0.5) ? 0.5 : -2.0;
    if (op == Op::mul) nb = ba * bb;
    if (op == Op::div_safe) nb = ba * 2;
    if (op == Op::maximum || op == Op::minimum) nb = std::max(ba, bb);
    if (op == Op::add_alpha) nb = ba + 2 * bb;
    if (op == Op::pow_safe) {
      if (bb > 2 || ba > 5) return false;
      nb = std::max(std::pow(ba + 0.5, bb), std::pow(2.0, bb));
    }
    if (nb > kMaxBound) return false;
    push(Instr{op, {a, b}, {}, x}, fresh(broadcast_shapes(val(a).shape, val(b).shape), nb));
    return true;
  }

  bool compare() {
    const int c = pick([](const ValueInfo& v) { return v.is_bool; });
    if (c >= 0 && r_.chance(0.6)) {
      if (r_.chance(0.2)) {
        push(Instr{Op::logical_not, {c}, {}, 0}, fresh(val(c).shape, 1, true));
        return true;
      }
      const int a = pick_broadcastable(val(c).shape);
      if (a < 0) return false;
      const Shape s = broadcast_shapes(val(c).shape, val(a).shape);
      const int b = pick_broadcastable(s);
      if (b < 0) return false;
      push(Instr{Op::where, {c, a, b}, {}, 0},
           fresh(broadcast_shapes(s, val(b).shape), std::max(val(a).bound, val(b).bound)));
      return true;
    }
    const int a = pick_float();
    if (a < 0) return false;
    if (r_.chance(0.3)) {
      push(Instr{Op::gt_scalar, {a}, {}, 0.25}, fresh(val(a).shape, 1, true));
      return true;
    }
    const int b = pick_broadcastable(val(a).shape);
    if (b < 0) return false;
    static const Op ops[] = {Op::gt, Op::lt, Op::ge, Op::le, Op::ne};
    push(Instr{ops[r_.below(std::size(ops))], {a, b}, {}, 0},
         fresh(broadcast_shapes(val(a).shape, val(b).shape), 1, true));
    return true;
  }

  bool reduction() {
    const int a = pick_float();
    if (a < 0) return false;
    const Shape& s = val(a).shape;
    const size_t rank = s.size();
    const double b = val(a).bound;
    const bool keep = r_.chance(0.4);
    const int64_t choice = r_.below(rank == 0 ? 3 : 15);
    if (choice < 3) {
      static const Op all[] = {Op::sum_all, Op::mean_all, Op::max_all};
      const Op op = all[choice];
      const double nb = op == Op::sum_all ? b * static_cast<double>(numel(s)) : b;
      if (nb > kMaxBound) return false;
      push(Instr{op, {a}, {}, 0}, fresh({}, nb));
      return true;
    }
    // Some dims, in random order and spelling; the result drops (or keeps as 1) them.
    std::vector<int64_t> dims;
    std::vector<bool> reduced(rank, false);
    for (size_t d = 0; d < rank; ++d)
      if (r_.chance(0.5)) reduced[d] = true;
    if (std::none_of(reduced.begin(), reduced.end(), [](bool x) { return x; }))
      reduced[static_cast<size_t>(dim_of(a))] = true;
    Shape out;
    int64_t count = 1;
    for (size_t d = 0; d < rank; ++d) {
      if (reduced[d]) {
        dims.push_back(spelled(static_cast<int64_t>(d), rank));
        count *= s[d];
        if (keep) out.push_back(1);
      } else {
        out.push_back(s[d]);
      }
    }
    if (r_.chance(0.5)) std::reverse(dims.begin(), dims.end());
    const int64_t d0 = dim_of(a);
    Shape out1 = s;
    if (keep)
      out1[static_cast<size_t>(d0)] = 1;
    else
      out1.erase(out1.begin() + d0);
    switch (choice) {
      case 3:
      case 4:
        if (b * static_cast<double>(count) > kMaxBound) return false;
        push(Instr{choice == 3 ? Op::sum_dims : Op::mean_dims, {a}, dims, keep ? 1.0 : 0.0},
             fresh(out, choice == 3 ? b * static_cast<double>(count) : b));
        return true;
      case 5:
        push(Instr{r_.chance(0.5) ? Op::amax : Op::amin, {a}, dims, keep ? 1.0 : 0.0},
             fresh(out, b));
        return true;
      case 6: {
        if (4 * b * b > kMaxBound) return false;
        const bool unbiased = count > 1 && r_.chance(0.5);
        push(Instr{Op::var_dims, {a}, dims, (keep ? 1.0 : 0.0) + (unbiased ? 2.0 : 0.0)},
             fresh(out, 4 * b * b));
        return true;
      }
      case 7:
        push(Instr{r_.chance(0.5) ? Op::max_dim : Op::min_dim,
                   {a},
                   {spelled(d0, rank)},
                   keep ? 1.0 : 0.0},
             fresh(out1, b));
        return true;
      case 10: {
        const double size = static_cast<double>(s[static_cast<size_t>(d0)]);
        if (b * size > kMaxBound) return false;
        push(Instr{Op::cumsum, {a}, {spelled(d0, rank)}, 0}, fresh(s, b * size));
        return true;
      }
      case 11:
        push(Instr{Op::cumprod_tanh, {a}, {spelled(d0, rank)}, 0}, fresh(s, 1));
        return true;
      case 12:
        push(Instr{Op::logcumsumexp, {a}, {spelled(d0, rank)}, 0},
             fresh(s, b + std::log(static_cast<double>(s[static_cast<size_t>(d0)])) + 1));
        return true;
      case 14: {
        // All (a sort) or the first few (topk) of dim d0 in order.
        const int64_t size = s[static_cast<size_t>(d0)];
        if (size == 0) return false;
        // At least one: the generator never makes a dim of size 0.
        const int64_t count = r_.chance(0.5) ? size : 1 + r_.below(size);
        Shape out = s;
        out[static_cast<size_t>(d0)] = count;
        push(Instr{Op::sort_values, {a}, {spelled(d0, rank), count}, r_.chance(0.5) ? 1.0 : 0.0},
             fresh(out, b));
        return true;
      }
      case 13: {
        // Some rows of dim d0, in any order, repeats allowed (their gradients add up).
        const int64_t size = s[static_cast<size_t>(d0)];
        if (size == 0) return false;
        std::vector<int64_t> ints{spelled(d0, rank)};
        const int64_t count = 1 + r_.below(4);
        for (int64_t k = 0; k < count; ++k) ints.push_back(r_.below(size));
        Shape out = s;
        out[static_cast<size_t>(d0)] = count;
        push(Instr{Op::index_select, {a}, ints, 0}, fresh(out, b));
        return true;
      }
      default: {
        const bool log = choice == 9;
        push(Instr{log ? Op::log_softmax : Op::softmax, {a}, {spelled(d0, rank)}, 0},
             fresh(s, log ? 2 * b + 2 : 1));
        return true;
      }
    }
  }

  Shape reshape_target(int64_t n) {
    Shape out;
    for (int64_t f = 2; f <= n; ++f)
      while (n % f == 0) {
        n /= f;
        if (!out.empty() && r_.chance(0.5))
          out.back() *= f;
        else
          out.push_back(f);
      }
    if (out.empty() || r_.chance(0.3)) out.insert(out.begin() + r_.below(out.size() + 1), 1);
    return out;
  }

  bool movement() {
    const int a = pick_float();
    if (a < 0) return false;
    const Shape& s = val(a).shape;
    const size_t rank = s.size();
    const int64_t choice = r_.below(11);
    if (rank == 0 && choice != 0 && choice != 6 && choice != 8 && choice != 9) return false;
    const int64_t d = rank ? dim_of(a) : 0;
    const int64_t size = rank ? s[static_cast<size_t>(d)] : 1;
    Shape out = s;
    switch (choice) {
      case 0: {
        out = reshape_target(numel(s));
        Shape spelled_shape = out;
        if (r_.chance(0.3)) spelled_shape[static_cast<size_t>(r_.below(out.size()))] = -1;
        push(Instr{Op::reshape, {a}, spelled_shape, 0}, view_of(a, out));
        return true;
      }
      case 1: {
        if (rank < 2) return false;
        std::vector<int64_t> perm(rank);
        for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
        for (size_t i = rank - 1; i > 0; --i) std::swap(perm[i], perm[r_.below(i + 1)]);
        for (size_t i = 0; i < rank; ++i) out[i] = s[static_cast<size_t>(perm[i])];
        push(Instr{Op::permute, {a}, perm, 0}, view_of(a, out));
        return true;
      }
      case 2: {
        if (rank < 2) return false;
        const int64_t e = dim_of(a);
        std::swap(out[static_cast<size_t>(d)], out[static_cast<size_t>(e)]);
        if (rank == 2 && r_.chance(0.5)) {
          push(Instr{Op::t, {a}, {}, 0}, view_of(a, {s[1], s[0]}));
          return true;
        }
        push(Instr{Op::transpose, {a}, {spelled(d, rank), spelled(e, rank)}, 0}, view_of(a, out));
        return true;
      }
      case 3: {
        const int64_t start = r_.below(size), step = r_.range(1, 3);
        const int64_t end = r_.range(start + 1, size);
        out[static_cast<size_t>(d)] = (end - start + step - 1) / step;
        push(Instr{Op::slice, {a}, {spelled(d, rank), start, end, step}, 0}, view_of(a, out));
        return true;
      }
      case 4: {
        const int64_t start = r_.below(size), len = r_.range(1, size - start);
        out[static_cast<size_t>(d)] = len;
        push(Instr{Op::narrow, {a}, {spelled(d, rank), start, len}, 0}, view_of(a, out));
        return true;
      }
      case 5: {
        const int64_t idx = r_.below(size);
        out.erase(out.begin() + d);
        push(Instr{Op::select, {a}, {spelled(d, rank), r_.chance(0.2) ? idx - size : idx}, 0},
             view_of(a, out));
        return true;
      }
      case 6: {
        Shape spelled_shape;
        out.clear();
        if (rank < 3 && r_.chance(0.4)) {
          const int64_t lead = r_.range(2, 3);
          out.push_back(lead);
          spelled_shape.push_back(lead);
        }
        for (int64_t x : s) {
          const int64_t y = x == 1 && r_.chance(0.7) ? r_.range(2, 4) : x;
          out.push_back(y);
          spelled_shape.push_back(y == x && r_.chance(0.3) ? -1 : y);
        }
        if (numel(out) > kMaxNumel) return false;
        ValueInfo v = view_of(a, out);
        v.overlap = numel(out) != numel(s);
        push(Instr{Op::expand, {a}, spelled_shape, 0}, v);
        return true;
      }
      case 7: {
        out.clear();
        if (r_.chance(0.5)) {
          for (int64_t x : s)
            if (x != 1) out.push_back(x);
          push(Instr{Op::squeeze_all, {a}, {}, 0}, view_of(a, out));
          return true;
        }
        if (size == 1) {
          out = s;
          out.erase(out.begin() + d);
        } else {
          out = s;  // squeezing a dim that is not 1 leaves the shape alone
        }
        push(Instr{Op::squeeze_dim, {a}, {spelled(d, rank)}, 0}, view_of(a, out));
        return true;
      }
      case 8: {
        const int64_t at = r_.range(0, static_cast<int64_t>(rank));
        out.insert(out.begin() + at, 1);
        push(Instr{Op::unsqueeze, {a}, {spelled(at, rank + 1)}, 0}, view_of(a, out));
        return true;
      }
      case 9:
        push(Instr{Op::flatten, {a}, {}, 0}, view_of(a, {numel(s)}));
        return true;
      default:
        push(Instr{Op::clone, {a}, {}, 0}, fresh(s, val(a).bound));
        return true;
    }
  }

  bool matmul() {
    if (r_.chance(0.5)) return r_.chance(0.3) ? adaptive() : attention();
    const int a = pick([](const ValueInfo& v) { return !v.is_bool && !v.shape.empty(); });
    if (a < 0) return false;
    const Shape& s = val(a).shape;
    const int b = pick([&](const ValueInfo& v) {
      auto m = v.is_bool ? std::nullopt : matmul_shape(s, v.shape);
      return m && numel(*m) <= kMaxNumel;
    });
    if (b >= 0 && r_.chance(0.7)) {
      const double nb = val(a).bound * val(b).bound * static_cast<double>(s.back());
      if (nb > kMaxBound) return false;
      push(Instr{Op::matmul, {a, b}, {}, 0}, fresh(*matmul_shape(s, val(b).shape), nb));
      return true;
    }
    const double nb = val(a).bound * val(a).bound * static_cast<double>(s.back());
    if (nb > kMaxBound) return false;
    Shape out(s.begin(), s.end() - 1);
    if (s.size() > 1) out.push_back(s[s.size() - 2]);
    push(Instr{Op::matmul_self, {a}, {static_cast<int64_t>(s.size())}, 0}, fresh(out, nb));
    return true;
  }

  // scaled_dot_product_attention(q [.., L, E], k [.., S, E], v [.., S, Ev]),
  // leading dims broadcasting: causal or not, the default scale or one given,
  // and sometimes k and v narrowed along S (two views) so that S != L.
  bool attention() {
    const int q = pick([](const ValueInfo& v) { return !v.is_bool && v.shape.size() >= 2; });
    if (q < 0) return false;
    const Shape qs = val(q).shape;
    auto lead = [](const Shape& s) { return Shape(s.begin(), s.end() - 2); };
    auto joint = [](const Shape& a, const Shape& b) -> std::optional<Shape> {
      try {
        return broadcast_shapes(a, b);
      } catch (const Error&) {
        return std::nullopt;
      }
    };
    // q itself qualifies as k, and k as v, so both picks succeed.
    const int k = pick([&](const ValueInfo& v) {
      return !v.is_bool && v.shape.size() >= 2 && v.shape.back() == qs.back() &&
             joint(lead(qs), lead(v.shape));
    });
    const Shape ks = val(k).shape, qk = *joint(lead(qs), lead(ks));
    const int64_t length = ks[ks.size() - 2];
    const int v = pick([&](const ValueInfo& x) {
      return !x.is_bool && x.shape.size() >= 2 && x.shape[x.shape.size() - 2] == length &&
             joint(qk, lead(x.shape));
    });
    const Shape vs = val(v).shape;
    Shape out = *joint(qk, lead(vs));
    out.push_back(qs[qs.size() - 2]);
    out.push_back(vs.back());
    if (numel(out) > kMaxNumel) return false;
    const bool causal = r_.chance(0.5), given = r_.chance(0.5);
    static const double scales[] = {0.5, 1.0, 2.0, -0.75, 0.125};
    const double scale = given ? scales[r_.below(std::size(scales))]
                               : 1.0 / std::sqrt(static_cast<double>(qs.back()));
    // Scores within +-100: softmax is then well conditioned in f32 too.
    if (std::abs(scale) * val(q).bound * val(k).bound * static_cast<double>(qs.back()) > 100)
      return false;
    int kn = k, vn = v;
    if (length > 1 && r_.chance(0.4)) {
      const int64_t len = r_.range(1, length - 1);
      auto narrow = [&](int a) {
        const Shape& s = val(a).shape;
        const size_t rank = s.size();
        Shape o = s;
        o[rank - 2] = len;
        push(Instr{Op::narrow,
                   {a},
                   {spelled(static_cast<int64_t>(rank) - 2, rank), r_.below(length - len + 1), len},
                   0},
             view_of(a, o));
        return static_cast<int>(vals_.size()) - 1;
      };
      kn = narrow(k);
      vn = narrow(v);
    }
    push(Instr{Op::attention, {q, kn, vn}, {causal ? 1 : 0, given ? 1 : 0}, given ? scale : 0},
         fresh(out, val(v).bound));
    return true;
  }

  // An adaptive softmax over a [N, E] (E >= 2: a head of E - 1 shortlist
  // classes and one cluster) with one cluster of R classes projected by b
  // [R, E] (a itself qualifies); targets in the shortlist, in the cluster, or
  // all in one of them. Weights through tanh keep the logits within E |a| R.
  bool adaptive() {
    const int a = pick([](const ValueInfo& v) {
      return !v.is_bool && v.shape.size() == 2 && v.shape[1] >= 2 && v.shape[0] >= 1;
    });
    if (a < 0) return false;
    const Shape as = val(a).shape;
    const int b = pick([&](const ValueInfo& v) {
      return !v.is_bool && v.shape.size() == 2 && v.shape[1] == as[1] && v.shape[0] >= 1;
    });
    const int64_t rows = as[0], shortlist = as[1] - 1, cluster = val(b).shape[0];
    const double logits = val(a).bound * static_cast<double>(as[1]) *
                          static_cast<double>(std::max<int64_t>(cluster, 1));
    const double nb = 2 * (val(a).bound * static_cast<double>(as[1]) + logits) +
                      std::log(static_cast<double>(shortlist + cluster)) + 1;
    if (nb > kMaxBound) return false;
    const int64_t mode = r_.below(3);  // mixed, all in the shortlist, all in the cluster
    std::vector<int64_t> targets;
    for (int64_t r = 0; r < rows; ++r) {
      const bool in_cluster = mode == 2 || (mode == 0 && r_.chance(0.5));
      targets.push_back(in_cluster ? shortlist + r_.below(cluster) : r_.below(shortlist));
    }
    push(Instr{Op::adaptive, {a, b}, targets, 0}, fresh({rows}, nb));
    return true;
  }

  // The broadcast shape of a set of index tensors: 0 to 2 dims of 1 to 3.
  Shape index_shape() {
    Shape b;
    const int64_t rank = r_.chance(0.15) ? 0 : r_.range(1, 2);
    for (int64_t i = 0; i < rank; ++i) b.push_back(r_.range(1, 3));
    return b;
  }
  // Appends an index tensor's payload (rank, sizes, values) for a dim of `size`:
  // mostly of shape b, else a suffix of b with some dims 1 (they broadcast to
  // b); values in [-size, size). Returns its shape.
  Shape index_payload(std::vector<int64_t>& ints, const Shape& b, int64_t size) {
    Shape shape = b;
    if (r_.chance(0.3)) {
      shape.assign(b.end() - r_.range(0, static_cast<int64_t>(b.size())), b.end());
      for (auto& d : shape)
        if (r_.chance(0.3)) d = 1;
    }
    ints.push_back(static_cast<int64_t>(shape.size()));
    ints.insert(ints.end(), shape.begin(), shape.end());
    for (int64_t i = 0; i < numel(shape); ++i) ints.push_back(r_.range(-size, size - 1));
    return shape;
  }

  // x.index({...}) over a prefix of a's dims: 1 to 3 index tensors (picked dims
  // adjacent or not), integers, full and partial slices; the result's shape by
  // PyTorch's rule (integers select first; the index tensors' shape B where the
  // first picked dim was when the picked dims are adjacent, else in front).
  bool advanced_index() {
    const int a = pick([](const ValueInfo& v) { return !v.is_bool && !v.shape.empty(); });
    if (a < 0) return false;
    const Shape& s = val(a).shape;
    const size_t used = static_cast<size_t>(r_.range(1, static_cast<int64_t>(s.size())));
    std::vector<int64_t> kinds(used);
    int tensors = 0;
    for (auto& k : kinds) {
      const int64_t x = r_.below(100);
      k = x < 45 && tensors < 3 ? 3 : x < 60 ? 1 : x < 80 ? 0 : 2;
      tensors += k == 3;
    }
    if (tensors == 0) kinds[static_cast<size_t>(r_.below(static_cast<int64_t>(used)))] = 3;
    const Shape want = index_shape();
    std::vector<int64_t> ints;
    Shape kept, b;     // the dims after the integers' selects; B
    std::vector<size_t> at;  // where the picked dims are among them
    for (size_t d = 0; d < s.size(); ++d) {
      const int64_t size = s[d];
      const int64_t kind = d < used ? kinds[d] : 0;
      if (d < used) ints.push_back(kind);
      if (kind == 1) {
        ints.push_back(r_.range(-size, size - 1));
      } else if (kind == 2) {
        const int64_t start = r_.below(size), stop = r_.range(start + 1, size), step = r_.range(1, 2);
        ints.insert(ints.end(), {start, stop, step});
        kept.push_back((stop - start + step - 1) / step);
      } else if (kind == 3) {
        at.push_back(kept.size());
        kept.push_back(size);
        b = broadcast_shapes(b, index_payload(ints, want, size));
      } else {
        kept.push_back(size);
      }
    }
    bool adjacent = true;
    for (size_t j = 1; j < at.size(); ++j) adjacent = adjacent && at[j] == at[0] + j;
    Shape out;
    const bool in_place = adjacent && at[0] != 0 && !b.empty();
    if (!in_place) out = b;
    for (size_t d = 0; d < kept.size(); ++d) {
      if (in_place && d == at[0]) out.insert(out.end(), b.begin(), b.end());
      if (std::find(at.begin(), at.end(), d) == at.end()) out.push_back(kept[d]);
    }
    if (numel(out) > kMaxNumel) return false;
    push(Instr{Op::index_adv, {a}, ints, 0}, fresh(out, val(a).bound));
    return true;
  }

  // `count` different dims of a tensor of `rank`, in random order.
  std::vector<int64_t> some_dims(size_t rank, size_t count) {
    std::vector<int64_t> d(rank);
    for (size_t i = 0; i < rank; ++i) d[i] = static_cast<int64_t>(i);
    for (size_t i = rank; i > 1; --i) std::swap(d[i - 1], d[static_cast<size_t>(r_.below(int64_t(i)))]);
    d.resize(count);
    return d;
  }

  // One of libtorch's tensor functions (frontend/tensor_extra.h) on values
  // that suit it; false when none do.
  bool composite() {
    const int a = pick_float();
    if (a < 0) return false;
    const Shape& s = val(a).shape;
    const size_t rank = s.size();
    const double ba = val(a).bound;
    const auto sp = [&](int64_t d) { return spelled(d, rank); };
    switch (r_.below(34)) {
      case 0: {  // movedim
        if (rank == 0) return false;
        const size_t k = static_cast<size_t>(r_.range(1, static_cast<int64_t>(rank)));
        const std::vector<int64_t> src = some_dims(rank, k), dst = some_dims(rank, k);
        std::vector<int64_t> perm(rank, -1);
        std::vector<bool> moved(rank, false);
        for (size_t i = 0; i < k; ++i) {
          perm[static_cast<size_t>(dst[i])] = src[i];
          moved[static_cast<size_t>(src[i])] = true;
        }
        size_t next = 0;
        for (auto& p : perm) {
          if (p >= 0) continue;
          while (moved[next]) ++next;
          p = static_cast<int64_t>(next++);
        }
        Shape out;
        for (int64_t p : perm) out.push_back(s[static_cast<size_t>(p)]);
        std::vector<int64_t> ints{static_cast<int64_t>(k)};
        for (int64_t d : src) ints.push_back(sp(d));
        for (int64_t d : dst) ints.push_back(sp(d));
        push(Instr{Op::movedim, {a}, ints, 0}, view_of(a, out));
        return true;
      }
      case 1: {  // tensordot over 0 to 2 pairs of dims of equal size
        const int b = pick_float();
        const Shape& t = val(b).shape;
        std::vector<int64_t> da, db;
        std::vector<bool> used(t.size(), false);
        double k = 1;
        for (int64_t d : some_dims(rank, std::min<size_t>(rank, static_cast<size_t>(r_.range(0, 2))))) {
          for (size_t e = 0; e < t.size(); ++e)
            if (!used[e] && t[e] == s[static_cast<size_t>(d)]) {
              used[e] = true;
              da.push_back(d);
              db.push_back(static_cast<int64_t>(e));
              k *= static_cast<double>(t[e]);
              break;
            }
        }
        Shape out;
        for (size_t d = 0; d < rank; ++d)
          if (std::find(da.begin(), da.end(), int64_t(d)) == da.end()) out.push_back(s[d]);
        for (size_t e = 0; e < t.size(); ++e)
          if (!used[e]) out.push_back(t[e]);
        const double nb = ba * val(b).bound * k;
        if (numel(out) > kMaxNumel || nb > kMaxBound) return false;
        std::vector<int64_t> ints{static_cast<int64_t>(da.size())};
        for (int64_t d : da) ints.push_back(sp(d));
        for (int64_t d : db) ints.push_back(spelled(d, t.size()));
        push(Instr{Op::tensordot, {a, b}, ints, 0}, fresh(out, nb));
        return true;
      }
      case 2: {  // rot90
        if (rank < 2) return false;
        const std::vector<int64_t> d = some_dims(rank, 2);
        const int64_t k = r_.range(-2, 5);
        Shape out = s;
        if (k % 2 != 0) std::swap(out[static_cast<size_t>(d[0])], out[static_cast<size_t>(d[1])]);
        push(Instr{Op::rot90, {a}, {k, sp(d[0]), sp(d[1])}, 0}, fresh(out, ba));
        return true;
      }
      case 3: {  // diag: a 1-D tensor onto a diagonal, or a matrix's diagonal
        if (rank == 1) {
          const int64_t k = r_.range(-2, 2), m = s[0] + std::abs(k);
          if (m * m > kMaxNumel) return false;
          push(Instr{Op::diag, {a}, {k}, 0}, fresh({m, m}, ba));
          return true;
        }
        if (rank != 2) return false;
        const int64_t k = r_.range(1 - s[0], s[1] - 1);
        const int64_t len = std::min(s[0] - std::max<int64_t>(0, -k), s[1] - std::max<int64_t>(0, k));
        push(Instr{Op::diag, {a}, {k}, 0}, fresh({len}, ba));
        return true;
      }
      case 4: {  // diagonal over two dims
        if (rank < 2) return false;
        const std::vector<int64_t> d = some_dims(rank, 2);
        const int64_t m = s[static_cast<size_t>(d[0])], n = s[static_cast<size_t>(d[1])];
        const int64_t k = r_.range(1 - m, n - 1);
        const int64_t len = std::min(m - std::max<int64_t>(0, -k), n - std::max<int64_t>(0, k));
        Shape out;
        for (size_t i = 0; i < rank; ++i)
          if (int64_t(i) != d[0] && int64_t(i) != d[1]) out.push_back(s[i]);
        out.push_back(len);
        push(Instr{Op::diagonal, {a}, {k, sp(d[0]), sp(d[1])}, 0}, fresh(out, ba));
        return true;
      }
      case 5:  // trace
        if (rank != 2) return false;
        push(Instr{Op::trace, {a}, {}, 0}, fresh({}, ba * static_cast<double>(std::min(s[0], s[1]))));
        return true;
      case 6: {  // cross along a dim of size 3
        std::vector<int64_t> threes;
        for (size_t d = 0; d < rank; ++d)
          if (s[d] == 3) threes.push_back(static_cast<int64_t>(d));
        if (threes.empty()) return false;
        const int64_t d = threes[static_cast<size_t>(r_.below(int64_t(threes.size())))];
        const int b = pick([&](const ValueInfo& v) {
          if (v.is_bool || v.shape.size() != rank || !broadcastable(v.shape, s)) return false;
          return true;
        });
        if (b < 0) return false;
        push(Instr{Op::cross, {a, b}, {sp(d)}, 0}, fresh(s, 2 * ba * val(b).bound));
        return true;
      }
      case 7: {  // kron
        const int b = pick_float();
        const Shape& t = val(b).shape;
        const size_t r = std::max(rank, t.size());
        Shape out(r);
        for (size_t i = 0; i < r; ++i) {
          const int64_t x = i + rank >= r ? s[i + rank - r] : 1, y = i + t.size() >= r ? t[i + t.size() - r] : 1;
          out[i] = x * y;
        }
        const double nb = ba * val(b).bound;
        if (numel(out) > kMaxNumel || nb > kMaxBound) return false;
        push(Instr{Op::kron, {a, b}, {}, 0}, fresh(out, nb));
        return true;
      }
      case 8: {  // unfold: windows of `size` every `step` along d, a new last dim
        if (rank == 0) return false;
        const int64_t d = dim_of(a), len = s[static_cast<size_t>(d)];
        const int64_t size = r_.range(1, len), step = r_.range(1, 3);
        Shape out = s;
        out[static_cast<size_t>(d)] = (len - size) / step + 1;
        out.push_back(size);
        if (numel(out) > kMaxNumel) return false;
        push(Instr{Op::unfold, {a}, {sp(d), size, step}, 0}, fresh(out, ba));
        return true;
      }
      case 9: {  // tile: fewer repeats than dims, as many, or more
        const size_t n = static_cast<size_t>(r_.range(1, static_cast<int64_t>(rank) + 1));
        std::vector<int64_t> reps(n);
        for (auto& x : reps) x = r_.range(1, 3);
        const size_t r = std::max(rank, n);
        Shape out(r);
        for (size_t i = 0; i < r; ++i)
          out[i] = (i + rank >= r ? s[i + rank - r] : 1) * (i + n >= r ? reps[i + n - r] : 1);
        if (numel(out) > kMaxNumel) return false;
        push(Instr{Op::tile, {a}, reps, 0}, fresh(out, ba));
        return true;
      }
      case 10: {  // diff, n times along d
        if (rank == 0) return false;
        const int64_t d = dim_of(a), len = s[static_cast<size_t>(d)];
        if (len < 2) return false;
        const int64_t n = r_.range(1, std::min<int64_t>(len - 1, 3));
        Shape out = s;
        out[static_cast<size_t>(d)] = len - n;
        push(Instr{Op::diff, {a}, {n, sp(d)}, 0}, fresh(out, ba * std::pow(2.0, double(n))));
        return true;
      }
      case 11: {  // cdist
        if (rank < 2) return false;
        const Shape lead(s.begin(), s.end() - 2);
        const int b = pick([&](const ValueInfo& v) {
          if (v.is_bool || v.shape.size() < 2 || v.shape.back() != s.back()) return false;
          try {
            broadcast_shapes(lead, Shape(v.shape.begin(), v.shape.end() - 2));
            return true;
          } catch (const Error&) {
            return false;
          }
        });
        const Shape& t = val(b).shape;  // a itself qualifies
        Shape out = broadcast_shapes(lead, Shape(t.begin(), t.end() - 2));
        out.push_back(s[rank - 2]);
        out.push_back(t[t.size() - 2]);
        static const double ps[] = {1.0, 2.0, 3.0, INFINITY};
        const double p = ps[r_.below(4)];
        if (numel(out) > kMaxNumel) return false;
        push(Instr{Op::cdist, {a, b}, {}, p},
             fresh(out, static_cast<double>(s.back()) * (ba + val(b).bound)));
        return true;
      }
      case 12: {  // logit
        static const double eps[] = {0.0, 0.0, 0.25, 0.125};
        push(Instr{Op::logit, {a}, {}, eps[r_.below(4)]}, fresh(s, 3));
        return true;
      }
      case 13: {  // xlogy
        const int b = pick_broadcastable(s);
        if (b < 0) return false;
        push(Instr{Op::xlogy, {a, b}, {}, 0},
             fresh(broadcast_shapes(s, val(b).shape), ba * 2.1));
        return true;
      }
      case 14:
      case 15:
      case 16:
      case 17: {  // lerp (a tensor weight or a scalar one), addcmul, addcdiv
        const int64_t which = r_.below(4);
        const int b = pick_broadcastable(s);
        if (b < 0) return false;
        const Shape st = broadcast_shapes(s, val(b).shape);
        const double bb = val(b).bound;
        static const double numbers[] = {0.25, 0.75, -0.5, 1.5, 1.0};
        const double x = numbers[r_.below(5)];
        if (which == 1) {
          const double nb = ba + std::abs(x) * (ba + bb);
          if (nb > kMaxBound) return false;
          push(Instr{Op::lerp_scalar, {a, b}, {}, x}, fresh(st, nb));
          return true;
        }
        const int c = pick_broadcastable(st);
        if (c < 0) return false;
        const double bc = val(c).bound;
        const Shape out = broadcast_shapes(st, val(c).shape);
        const Op op = which == 0 ? Op::lerp : which == 2 ? Op::addcmul : Op::addcdiv;
        const double nb = op == Op::lerp      ? ba + bc * (ba + bb)
                          : op == Op::addcmul ? ba + std::abs(x) * bb * bc
                                              : ba + std::abs(x) * bb * 2;
        if (nb > kMaxBound) return false;
        push(Instr{op, {a, b, c}, {}, op == Op::lerp ? 0 : x}, fresh(out, nb));
        return true;
      }
      case 18: {  // median of all, or along a dim
        if (rank == 0 || r_.chance(0.3)) {
          push(Instr{Op::median, {a}, {}, 0}, fresh({}, ba));
          return true;
        }
        const int64_t d = dim_of(a);
        const bool keep = r_.chance(0.4);
        Shape out = s;
        if (keep)
          out[static_cast<size_t>(d)] = 1;
        else
          out.erase(out.begin() + d);
        push(Instr{Op::median, {a}, {sp(d)}, keep ? 1.0 : 0.0}, fresh(out, ba));
        return true;
      }
      case 19:
      case 20: {  // std_mean, var_mean over some dims: their sum
        if (rank == 0) return false;
        const size_t k = static_cast<size_t>(r_.range(1, static_cast<int64_t>(rank)));
        const std::vector<int64_t> dims = some_dims(rank, k);
        const bool keep = r_.chance(0.4);
        int64_t count = 1;
        Shape out;
        std::vector<int64_t> spelled_dims;
        for (size_t d = 0; d < rank; ++d) {
          const bool reduced = std::find(dims.begin(), dims.end(), int64_t(d)) != dims.end();
          if (reduced) count *= s[d];
          if (!reduced || keep) out.push_back(reduced ? 1 : s[d]);
        }
        for (int64_t d : dims) spelled_dims.push_back(sp(d));
        const bool unbiased = count > 1 && r_.chance(0.5);
        const bool is_std = r_.chance(0.5);
        const double nb = (is_std ? 2 * ba : 4 * ba * ba) + ba;
        if (nb > kMaxBound) return false;
        push(Instr{is_std ? Op::std_mean : Op::var_mean, {a}, spelled_dims,
                   (keep ? 1.0 : 0.0) + (unbiased ? 2.0 : 0.0)},
             fresh(out, nb));
        return true;
      }
      case 21: {  // linalg::vector_norm over some dims (or all)
        static const double ords[] = {2.0, 1.0, 3.0, INFINITY, -INFINITY};
        const double ord = ords[r_.below(5)];
        const bool keep = r_.chance(0.4);
        std::vector<int64_t> ints{keep ? 1 : 0};
        Shape out;
        if (rank == 0 || r_.chance(0.3)) {
          out.assign(keep ? rank : 0, 1);
        } else {
          const std::vector<int64_t> dims = some_dims(rank, static_cast<size_t>(r_.range(1, int64_t(rank))));
          for (int64_t d : dims) ints.push_back(sp(d));
          for (size_t d = 0; d < rank; ++d) {
            const bool reduced = std::find(dims.begin(), dims.end(), int64_t(d)) != dims.end();
            if (!reduced || keep) out.push_back(reduced ? 1 : s[d]);
          }
        }
        const double nb = ba * static_cast<double>(numel(s));
        if (nb > kMaxBound) return false;
        push(Instr{Op::vector_norm, {a}, ints, ord}, fresh(out, nb));
        return true;
      }
      case 22: {  // linalg::matrix_norm over two dims
        if (rank < 2) return false;
        static const double ords[] = {0.0, 1.0, -1.0, INFINITY, -INFINITY};
        const double ord = ords[r_.below(5)];
        const std::vector<int64_t> d = some_dims(rank, 2);
        const bool keep = r_.chance(0.4);
        Shape out;
        for (size_t i = 0; i < rank; ++i) {
          const bool reduced = int64_t(i) == d[0] || int64_t(i) == d[1];
          if (!reduced || keep) out.push_back(reduced ? 1 : s[i]);
        }
        const double nb = ba * static_cast<double>(s[size_t(d[0])] * s[size_t(d[1])]);
        if (nb > kMaxBound) return false;
        push(Instr{Op::matrix_norm, {a}, {keep ? 1 : 0, sp(d[0]), sp(d[1])}, ord}, fresh(out, nb));
        return true;
      }
      case 23: {  // take, negative positions too
        std::vector<int64_t> ints;
        const Shape out = index_payload(ints, index_shape(), numel(s));
        push(Instr{Op::take, {a}, ints, 0}, fresh(out, ba));
        return true;
      }
      case 25:
      case 26: {  // addr, addmv: c broadcast to the product, beta 0 leaves it out
        const bool mv = r_.chance(0.5);
        if (rank != (mv ? 2u : 1u)) return false;
        const int b = pick([&](const ValueInfo& v) {
          return !v.is_bool && v.shape.size() == 1 && (!mv || v.shape[0] == s[1]);
        });
        if (b < 0) return false;
        const Shape out = mv ? Shape{s[0]} : Shape{s[0], val(b).shape[0]};
        const int c = pick([&](const ValueInfo& v) { return !v.is_bool && broadcastable(v.shape, out); });
        if (c < 0) return false;
        static const double betas[] = {0.0, 1.0, 0.5};
        const double beta = betas[r_.below(3)];
        const int64_t alpha = r_.chance(0.5) ? 1 : -2;
        const double nb = beta * val(c).bound + std::abs(double(alpha)) * ba * val(b).bound *
                                                    (mv ? static_cast<double>(s[1]) : 1.0);
        if (nb > kMaxBound) return false;
        push(Instr{mv ? Op::addmv : Op::addr, {c, a, b}, {alpha}, beta}, fresh(out, nb));
        return true;
      }
      case 27:
      case 28: {  // index_fill, index_copy (a place named twice: the mean)
        if (rank == 0) return false;
        const int64_t d = dim_of(a), size = s[static_cast<size_t>(d)];
        std::vector<int64_t> ints{sp(d)};
        const int64_t count = r_.range(1, 3);
        for (int64_t k = 0; k < count; ++k) ints.push_back(r_.below(size));
        if (r_.chance(0.5)) {
          const double value = r_.chance(0.5) ? 0.5 : -1.25;
          push(Instr{Op::index_fill, {a}, ints, value}, fresh(s, std::max(ba, 1.25)));
          return true;
        }
        Shape src = s;
        src[static_cast<size_t>(d)] = count;
        const int b = pick([&](const ValueInfo& v) { return !v.is_bool && broadcastable(v.shape, src); });
        if (b < 0) return false;
        push(Instr{Op::index_copy, {a, b}, ints, 0}, fresh(s, std::max(ba, val(b).bound)));
        return true;
      }
      case 29: {  // copysign, sinc
        if (r_.chance(0.5)) {
          push(Instr{Op::sinc, {a}, {}, 0}, fresh(s, 1));
          return true;
        }
        const int b = pick_broadcastable(s);
        if (b < 0) return false;
        push(Instr{Op::copysign, {a, b}, {}, 0}, fresh(broadcast_shapes(s, val(b).shape), ba));
        return true;
      }
      case 30:
      case 31: {  // nanmean over some dims, aminmax over all or one dim
        if (rank == 0) return false;
        const bool keep = r_.chance(0.4);
        if (r_.chance(0.5)) {
          const std::vector<int64_t> dims = some_dims(rank, static_cast<size_t>(r_.range(1, int64_t(rank))));
          Shape out;
          std::vector<int64_t> ints;
          for (int64_t d : dims) ints.push_back(sp(d));
          for (size_t d = 0; d < rank; ++d) {
            const bool reduced = std::find(dims.begin(), dims.end(), int64_t(d)) != dims.end();
            if (!reduced || keep) out.push_back(reduced ? 1 : s[d]);
          }
          push(Instr{Op::nanmean, {a}, ints, keep ? 1.0 : 0.0}, fresh(out, ba));
          return true;
        }
        if (r_.chance(0.3)) {
          push(Instr{Op::aminmax, {a}, {}, 0}, fresh({}, 2 * ba));
          return true;
        }
        const int64_t d = dim_of(a);
        Shape out = s;
        if (keep)
          out[static_cast<size_t>(d)] = 1;
        else
          out.erase(out.begin() + d);
        push(Instr{Op::aminmax, {a}, {sp(d)}, keep ? 1.0 : 0.0}, fresh(out, 2 * ba));
        return true;
      }
      case 32:
      case 33: {  // repeat_interleave, 1 to 3 times, along a dim or flattened
        const int64_t times = r_.range(1, 3);
        if (rank == 0 || r_.chance(0.3)) {
          if (numel(s) * times > kMaxNumel) return false;
          push(Instr{Op::repeat_interleave, {a}, {times}, 0}, fresh({numel(s) * times}, ba));
          return true;
        }
        const int64_t d = dim_of(a);
        Shape out = s;
        out[static_cast<size_t>(d)] *= times;
        if (numel(out) > kMaxNumel) return false;
        push(Instr{Op::repeat_interleave, {a}, {times, sp(d)}, 0}, fresh(out, ba));
        return true;
      }
      default: {  // searchsorted, bucketize: positions, no gradient
        const int b = rank > 1 ? pick([&](const ValueInfo& v) {
          return !v.is_bool && v.shape.size() == rank &&
                 std::equal(s.begin(), s.end() - 1, v.shape.begin());
        })
                               : pick_float();
        if (rank == 0 || b < 0) return false;
        const bool right = r_.chance(0.5);
        if (r_.chance(0.5)) {
          push(Instr{Op::searchsorted, {a, b}, {}, right ? 1.0 : 0.0},
               fresh(val(b).shape, static_cast<double>(s.back())));
        } else {
          push(Instr{Op::bucketize, {a, b}, {}, right ? 1.0 : 0.0},
               fresh(val(b).shape, static_cast<double>(numel(s))));
        }
        return true;
      }
    }
  }

  bool detach() {
    const int a = pick_float();
    if (a < 0) return false;
    push(Instr{Op::detach, {a}, {}, 0}, view_of(a, val(a).shape));
    return true;
  }

  bool in_place() {
    // No in-place writes to a leaf that requires grad (or its views) with grad
    // on, nor to tensors whose elements alias each other (expand), nor (unless
    // asked for) to storage the tape saved for the backward.
    const bool to_recorded = has(kInPlaceRecorded) && r_.chance(0.3);
    const int t = pick([&](const ValueInfo& v) {
      const bool rg_leaf =
          std::find(rg_groups_.begin(), rg_groups_.end(), v.group) != rg_groups_.end();
      return !v.is_bool && !v.overlap && (nograd_ || !rg_leaf) && recorded(v.group) == to_recorded;
    });
    if (t < 0) return false;
    const Shape& s = val(t).shape;
    const double bt = val(t).bound;
    const int64_t choice = r_.below(has(kIndexing) && !s.empty() ? 9 : 6);
    double nb = bt, x = 0;
    Instr in{Op::relu_, {t}, {}, 0};
    // Whether t may take a value from src (then noted).
    auto source_ok = [&](int src) {
      // A tensor given a value that requires grad requires grad from then on;
      // a captured one does so from the start of the next call, when the ops
      // before this write record it on the tape: the write then goes to
      // storage the tape saved.
      if (!to_recorded && !nograd_ && val(src).requires_grad && !val(t).requires_grad &&
          std::find(read_.begin(), read_.end(), val(t).group) != read_.end())
        return false;
      const int g = val(t).group;
      if (!nograd_ && val(src).requires_grad && !val(t).requires_grad &&
          g < static_cast<int>(p_.inputs.size()) && p_.inputs[static_cast<size_t>(g)].captured)
        captured_takes_history_ = true;
      return true;
    };
    if (choice < 3) {
      const int src = pick([&](const ValueInfo& v) {
        return !v.is_bool && broadcastable(v.shape, s) && (choice != 2 || v.bound <= 2);
      });
      if (src < 0 || !source_ok(src)) return false;
      in = Instr{choice == 0 ? Op::add_ : choice == 1 ? Op::sub_ : Op::mul_, {t, src}, {}, 0};
      nb = choice == 2 ? bt * val(src).bound : bt + val(src).bound;
    } else if (choice >= 6) {
      // index_put_ with 1 to 3 index tensors on the leading dims, repeats
      // allowed: accumulated, or (Kiln's rule for a place named twice) the mean
      // of the values written there, the same eagerly and traced.
      const size_t k = static_cast<size_t>(r_.range(1, std::min<int64_t>(3, int64_t(s.size()))));
      std::vector<int64_t> ints{static_cast<int64_t>(k)};
      const Shape want = index_shape();
      Shape b;
      for (size_t j = 0; j < k; ++j) b = broadcast_shapes(b, index_payload(ints, want, s[j]));
      Shape values = b;
      values.insert(values.end(), s.begin() + static_cast<long>(k), s.end());
      const bool accumulate = r_.chance(0.5);
      int src = pick([&](const ValueInfo& v) { return !v.is_bool && broadcastable(v.shape, values); });
      const bool mean = src < 0 || r_.chance(0.15);
      if (mean) src = pick_float();
      if (src < 0 || !source_ok(src)) return false;
      nb = accumulate ? bt + static_cast<double>(numel(b)) * val(src).bound
                      : std::max(bt, val(src).bound);
      in = Instr{Op::index_put_, {t, src}, ints, (accumulate ? 1.0 : 0.0) + (mean ? 2.0 : 0.0)};
    } else if (choice < 5) {
      x = choice == 3 ? 0.5 : -1.5;
      in = Instr{choice == 3 ? Op::add_scalar_ : Op::mul_scalar_, {t}, {}, x};
      nb = choice == 3 ? bt + 0.5 : bt * 1.5;
    }
    if (nb > kMaxBound) return false;
    // Every value that may share the storage can now hold the larger values.
    for (auto& v : vals_)
      if (v.group == val(t).group) v.bound = std::max(v.bound, nb);
    push(in, view_of(t, s));
    return true;
  }

  void pick_outputs() {
    std::vector<int> floats;
    for (size_t i = 0; i < vals_.size(); ++i)
      if (!vals_[i].marker && !vals_[i].is_bool) floats.push_back(static_cast<int>(i));
    p_.outputs.push_back(floats.back());
    for (int k = 0; k < 2; ++k) {
      const int o = floats[static_cast<size_t>(r_.below(static_cast<int64_t>(floats.size())))];
      if (r_.chance(0.5) && std::find(p_.outputs.begin(), p_.outputs.end(), o) == p_.outputs.end())
        p_.outputs.push_back(o);
    }
  }

  Rng r_;
  uint32_t f_;
  Program p_;
  std::vector<ValueInfo> vals_;
  std::vector<int> rg_groups_;           // storage of inputs that require grad
  std::vector<int> recorded_;            // storage saved by the tape
  std::vector<int> read_;                // storage read by differentiable ops with grad on
  bool captured_takes_history_ = false;  // a captured tensor is given a value requiring grad
  int next_group_ = 0;
  bool nograd_ = false;
};

}  // namespace

Program generate(uint64_t seed, uint32_t features) {
  return Generator(seed, features).run();
}

}  // namespace kiln::fuzz
