// The program generator: random but valid programs (program.h's generate()).
// This file holds the driver, the inputs, the bookkeeping of values and
// storage, the elementwise ops, detach and in-place writes; the other groups
// of instructions are in the generate_*.cpp files (tools/fuzz/generator.h).
#include <algorithm>
#include <cmath>
#include <iterator>

#include "ir/error.h"
#include "tools/fuzz/coverage.h"
#include "tools/fuzz/generator.h"
#include "tools/fuzz/instr.h"

namespace kiln::fuzz {

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

Program Generator::run() {
  p_.dtype = has(kFloat32) && r_.chance(0.25) ? DType::f32 : DType::f64;
  std::vector<Mode> modes{Mode::no_grad};
  if (has(kBackwardOutside)) modes.insert(modes.end(), 3, Mode::backward_outside);
  if (has(kBackwardInside)) modes.insert(modes.end(), 3, Mode::backward_inside);
  p_.mode = modes[static_cast<size_t>(r_.below(static_cast<int64_t>(modes.size())))];
  make_inputs();
  const int64_t n = r_.range(2, 12);
  for (int64_t i = 0; i < n && !ended_; ++i) step();
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

Shape Generator::random_shape() {
  const int64_t rank = r_.range(1, 3);
  Shape s;
  for (int64_t i = 0; i < rank; ++i) s.push_back(r_.chance(0.25) ? 1 : r_.range(2, 5));
  return s;
}

void Generator::make_inputs() {
  // Shapes are suffixes of one base shape with some dims set to 1: they broadcast.
  Shape base = random_shape();
  // A dim of size 0 in some programs: it broadcasts with the inputs' 1s there.
  if (has(kZeroSize) && r_.chance(0.15))
    base[static_cast<size_t>(r_.below(int64_t(base.size())))] = 0;
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

int Generator::pick(const std::function<bool(const ValueInfo&)>& ok) {
  std::vector<int> c;
  for (size_t i = 0; i < vals_.size(); ++i)
    if (!vals_[i].marker && ok(vals_[i])) c.push_back(static_cast<int>(i));
  if (c.empty()) return -1;
  if (c.size() > 3 && r_.chance(0.5)) return c[c.size() - 1 - static_cast<size_t>(r_.below(3))];
  return c[static_cast<size_t>(r_.below(static_cast<int64_t>(c.size())))];
}

int Generator::pick_broadcastable(const Shape& s) {
  return pick([&](const ValueInfo& v) {
    if (v.is_bool) return false;
    try {
      return numel(broadcast_shapes(s, v.shape)) <= kMaxNumel;
    } catch (const Error&) {
      return false;
    }
  });
}

bool Generator::recorded(int group) const {
  return std::find(recorded_.begin(), recorded_.end(), group) != recorded_.end();
}

void Generator::push(Instr in, ValueInfo v) {
  bool any_rg = false;
  for (int o : in.operands) any_rg = any_rg || val(o).requires_grad;
  const bool differentiable = in.op != Op::detach && in.op != Op::searchsorted &&
                              in.op != Op::bucketize && in.op != Op::histc && !v.is_bool;
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
  if (!v.marker) in.shape = v.shape;
  in.value = v.value;
  v.value.reset();  // views of it may be written later
  p_.instrs.push_back(std::move(in));
  vals_.push_back(std::move(v));
}

void Generator::marker(Op op) {
  ValueInfo v;
  v.marker = true;
  push(Instr{op, {}, {}, 0}, v);
  nograd_ = op == Op::nograd_begin;
}

ValueInfo Generator::fresh(Shape s, double bound, bool is_bool) {
  ValueInfo v;
  v.shape = std::move(s);
  v.bound = bound;
  v.is_bool = is_bool;
  v.group = next_group_++;
  return v;
}

ValueInfo Generator::fresh_known(Shape s, double value) {
  ValueInfo v = fresh(std::move(s), std::isnan(value) ? 0 : std::abs(value));
  v.value = value;
  return v;
}

bool Generator::raise(Instr in) {
  if (!r_.chance(0.3)) return false;
  in.throws = true;
  ValueInfo v;
  v.marker = true;  // no later call reads it: there is none
  push(std::move(in), v);
  ended_ = true;
  return true;
}

ValueInfo Generator::view_of(int a, Shape s) {
  ValueInfo v = val(a);
  v.shape = std::move(s);
  return v;
}

void Generator::step() {
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

bool Generator::unary() {
  const int a = pick_float();
  if (a < 0) return false;
  if (r_.chance(0.5)) return math(a);
  static const Op ops[] = {Op::neg,         Op::abs,        Op::sign,       Op::relu,
                           Op::clamp,       Op::pow_scalar, Op::add_scalar, Op::mul_scalar,
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

bool Generator::math(int a, int b) {
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

bool Generator::binary() {
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

bool Generator::compare() {
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

bool Generator::detach() {
  const int a = pick_float();
  if (a < 0) return false;
  push(Instr{Op::detach, {a}, {}, 0}, view_of(a, val(a).shape));
  return true;
}

bool Generator::in_place() {
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
    bool empty = draw_empty();
    for (size_t j = 0; j < k; ++j) empty = empty || s[j] == 0;
    const Shape want = index_shape(empty);
    Shape b;
    for (size_t j = 0; j < k; ++j) b = broadcast_shapes(b, index_payload(ints, want, s[j]));
    Shape values = b;
    values.insert(values.end(), s.begin() + static_cast<long>(k), s.end());
    const bool accumulate = r_.chance(0.5);
    int src =
        pick([&](const ValueInfo& v) { return !v.is_bool && broadcastable(v.shape, values); });
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
  written_.push_back(val(t).group);
  // Every value that may share the storage can now hold the larger values.
  for (auto& v : vals_)
    if (v.group == val(t).group) v.bound = std::max(v.bound, nb);
  push(in, view_of(t, s));
  return true;
}

void Generator::pick_outputs() {
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

Program generate(uint64_t seed, uint32_t features) {
  return Generator(seed, features).run();
}

}  // namespace kiln::fuzz
