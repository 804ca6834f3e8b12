// Each fuzzer op as a frontend call (apply) and as C++ text (cpp); see ops.def
// for the meaning of an instruction's ints and number.
#include "tools/fuzz/instr.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "frontend/nn.h"
#include "frontend/nn_adaptive.h"
#include "ir/error.h"
#include "ir/op.h"

namespace kiln::fuzz {

namespace {

const char* const kOpNames[] = {
#define KILN_FUZZ_OP(name, arity) #name,
#include "tools/fuzz/ops.def"
#undef KILN_FUZZ_OP
};
const int kOpArity[] = {
#define KILN_FUZZ_OP(name, arity) arity,
#include "tools/fuzz/ops.def"
#undef KILN_FUZZ_OP
};

std::string list(const std::vector<int64_t>& v, size_t from = 0) {
  std::string s = "{";
  for (size_t i = from; i < v.size(); ++i) s += (i > from ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

std::string flag(bool b) {
  return b ? "true" : "false";
}

// op applied to x (and y, for a binary op) through its Tensor method: a math
// row without one fails to compile here.
Tensor math_call(OpKind k, const Tensor& x, const Tensor& y = Tensor()) {
  switch (k) {
#define KILN_FUZZ_MATH1(kir, name) \
  case OpKind::name:               \
    return x.name();
#define KILN_FUZZ_MATH2(kir, name) \
  case OpKind::name:               \
    return x.name(y);
#define KILN_OP(name, arity, category, shape, dtype, vjp, cost, scalar, domain) \
  KILN_SCALAR_MATH_N(1, KILN_FUZZ_MATH1, name, arity, scalar)                   \
  KILN_SCALAR_MATH_N(2, KILN_FUZZ_MATH2, name, arity, scalar)
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_FUZZ_MATH1
#undef KILN_FUZZ_MATH2
    default:
      break;
  }
  throw Error(std::string("fuzz: ") + op_name(k) + " is not a math op of the table");
}

OpKind math_kind(const Instr& in) {
  return static_cast<OpKind>(in.ints.at(0));
}

// lo + (hi - lo) * sigmoid(a): any value into the interval, smoothly.
Tensor into(const Tensor& a, double lo, double hi) {
  return a.sigmoid() * (hi - lo) + lo;
}
std::string into_cpp(const std::string& a, double lo, double hi) {
  return "(" + a + ".sigmoid() * " + number_literal(hi - lo) + " + " + number_literal(lo) + ")";
}

// The op on a grid that covers its intervals, as math/math2 compute it.
double max_abs_over(OpKind k, const MathForm& f) {
  const int64_t n = op_info(k).arity == 1 ? 2049 : 257;
  std::vector<double> grid(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) grid[size_t(i)] = -30.0 + 60.0 * double(i) / double(n - 1);
  const Tensor g = from_vector(grid, {n}, kFloat64);
  const Tensor x = into(g, f.lo[0], f.hi[0]);
  const Tensor y = op_info(k).arity == 1
                       ? math_call(k, x)
                       : math_call(k, x.unsqueeze(1), into(g, f.lo[1], f.hi[1]));
  return y.abs().max().item<double>();
}


// An int64 index tensor from n[at...]: its rank r, r sizes, then its values
// (the payload of an index entry, ops.def); `at` moves past it.
Tensor index_tensor(const std::vector<int64_t>& n, size_t& at) {
  const size_t rank = static_cast<size_t>(n.at(at++));
  const Shape shape(n.begin() + static_cast<long>(at), n.begin() + static_cast<long>(at + rank));
  at += rank;
  const size_t count = static_cast<size_t>(numel(shape));
  const std::vector<double> v(n.begin() + static_cast<long>(at),
                              n.begin() + static_cast<long>(at + count));
  at += count;
  return from_vector(v, shape, kInt64);
}
std::string index_tensor_cpp(const std::vector<int64_t>& n, size_t& at) {
  const size_t rank = static_cast<size_t>(n.at(at++));
  const std::vector<int64_t> shape(n.begin() + static_cast<long>(at),
                                   n.begin() + static_cast<long>(at + rank));
  at += rank;
  const size_t count = static_cast<size_t>(numel(shape));
  const std::vector<int64_t> v(n.begin() + static_cast<long>(at),
                               n.begin() + static_cast<long>(at + count));
  at += count;
  return "tensor(" + list(v) + ").reshape(" + list(shape) + ")";
}

// The entries of an index_adv instruction (ops.def), run and printed.
std::vector<indexing::TensorIndex> index_entries(const std::vector<int64_t>& n) {
  std::vector<indexing::TensorIndex> r;
  for (size_t at = 0; at < n.size();) {
    switch (n[at++]) {
      case 0:
        r.emplace_back(indexing::Slice());
        break;
      case 1:
        r.emplace_back(n.at(at++));
        break;
      case 2:
        r.emplace_back(indexing::Slice(n.at(at), n.at(at + 1), n.at(at + 2)));
        at += 3;
        break;
      default:
        r.emplace_back(index_tensor(n, at));
        break;
    }
  }
  return r;
}
std::string index_entries_cpp(const std::vector<int64_t>& n) {
  std::string r;
  for (size_t at = 0; at < n.size();) {
    r += r.empty() ? "" : ", ";
    switch (n[at++]) {
      case 0:
        r += "indexing::Slice()";
        break;
      case 1:
        r += std::to_string(n.at(at++));
        break;
      case 2:
        r += "indexing::Slice(" + std::to_string(n.at(at)) + ", " + std::to_string(n.at(at + 1)) +
             ", " + std::to_string(n.at(at + 2)) + ")";
        at += 3;
        break;
      default:
        r += index_tensor_cpp(n, at);
        break;
    }
  }
  return "{" + r + "}";
}

// index_put_'s index tensors: their count, then each one's payload.
std::vector<Tensor> put_indices(const std::vector<int64_t>& n) {
  std::vector<Tensor> r;
  size_t at = 1;
  for (int64_t k = 0; k < n.at(0); ++k) r.push_back(index_tensor(n, at));
  return r;
}
std::string put_indices_cpp(const std::vector<int64_t>& n) {
  std::string r;
  size_t at = 1;
  for (int64_t k = 0; k < n.at(0); ++k) r += (k ? ", " : "") + index_tensor_cpp(n, at);
  return "{" + r + "}";
}

// The first `count` ints from n[from], and the next `count`.
std::vector<int64_t> ints_at(const std::vector<int64_t>& n, size_t from, size_t count) {
  return std::vector<int64_t>(n.begin() + static_cast<long>(from),
                              n.begin() + static_cast<long>(from + count));
}

// matrix_norm's ord: "fro" (number 0) or the number.
Tensor matrix_norm_call(const Tensor& a, double ord, std::vector<int64_t> dims, bool keep) {
  if (ord == 0) return linalg::matrix_norm(a, "fro", std::move(dims), keep);
  return linalg::matrix_norm(a, ord, std::move(dims), keep);
}
std::string ord_cpp(double ord) {
  if (std::isinf(ord)) return ord > 0 ? "INFINITY" : "-INFINITY";
  return number_literal(ord);
}

// index_copy's source: b expanded to a's shape with `count` along dim d.
Tensor copy_source(const Tensor& a, const Tensor& b, int64_t d, int64_t count) {
  Shape s = a.sizes();
  s.at(static_cast<size_t>(d < 0 ? d + a.dim() : d)) = count;
  return b.expand(s);
}
std::string copy_source_cpp(const std::string& a, const std::string& b, int64_t d, int64_t count) {
  return "[&] { Shape s = " + a + ".sizes(); s[" + std::to_string(d) + " < 0 ? " + std::to_string(d) +
         " + " + a + ".dim() : " + std::to_string(d) + "] = " + std::to_string(count) + "; return " + b +
         ".expand(s); }()";
}
// The operands from 0 on, and their names.
std::vector<Tensor> all_operands(const Instr& in, const std::vector<Tensor>& values) {
  std::vector<Tensor> r;
  for (int o : in.operands) r.push_back(values.at(static_cast<size_t>(o)));
  return r;
}
std::string all_operands_cpp(const Instr& in, const std::vector<std::string>& names) {
  std::string r;
  for (int o : in.operands) r += (r.empty() ? "" : ", ") + names.at(static_cast<size_t>(o));
  return "{" + r + "}";
}

// nan_to_num's operand and call: NaN and the infinities whose replacement the
// mask gives put into a first (ops.def).
Tensor nan_to_num_call(const Tensor& a, int64_t mask) {
  Tensor x = a.masked_fill(a.abs() < 0.25, NAN);
  if (mask & 2) x = x.masked_fill(a > 1.5, INFINITY);
  if (mask & 4) x = x.masked_fill(a < -1.5, -INFINITY);
  return x.nan_to_num((mask & 1) ? std::optional<double>(0.5) : std::nullopt,
                      (mask & 2) ? std::optional<double>(3.0) : std::nullopt,
                      (mask & 4) ? std::optional<double>(-3.0) : std::nullopt);
}
std::string nan_to_num_cpp(const std::string& a, int64_t mask) {
  std::string x = a + ".masked_fill(" + a + ".abs() < 0.25, NAN)";
  if (mask & 2) x += ".masked_fill(" + a + " > 1.5, INFINITY)";
  if (mask & 4) x += ".masked_fill(" + a + " < -1.5, -INFINITY)";
  return x + ".nan_to_num(" + ((mask & 1) ? "0.5" : "std::nullopt") + ", " +
         ((mask & 2) ? "3.0" : "std::nullopt") + ", " + ((mask & 4) ? "-3.0" : "std::nullopt") + ")";
}

// The sum of meshgrid's grids.
Tensor grids_sum(const std::vector<Tensor>& xs, bool xy) {
  Tensor r;
  for (const Tensor& g : meshgrid(xs, xy ? "xy" : "ij")) r = r.defined() ? r + g : g;
  return r;
}
}  // namespace

MathForm math_form(OpKind k) {
  static const std::map<OpKind, MathForm> forms = [] {
    std::map<OpKind, MathForm> m;
    for (OpKind op : all_ops()) {
      if (!is_math(op)) continue;
      const Domain& d = op_info(op).domain;
      MathForm f{{d.low(0), d.low(1)}, {d.high(0), d.high(1)}, 0};
      // Narrowed about its middle while the op's values would pass kMathBound (exp).
      for (int i = 0; i < 40 && (f.bound = max_abs_over(op, f)) > kMathBound; ++i)
        for (int o = 0; o < 2; ++o) {
          const double mid = (f.lo[o] + f.hi[o]) / 2;
          f.lo[o] = mid + 0.9 * (f.lo[o] - mid);
          f.hi[o] = mid + 0.9 * (f.hi[o] - mid);
        }
      m.emplace(op, f);
    }
    return m;
  }();
  const auto it = forms.find(k);
  if (it == forms.end())
    throw Error(std::string("fuzz: ") + op_name(k) + " is not a math op of the table");
  return it->second;
}

const char* op_name(Op op) {
  return kOpNames[static_cast<int>(op)];
}
int op_arity(Op op) {
  return kOpArity[static_cast<int>(op)];
}

std::string number_literal(double x) {
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string s = buf;
  if (s.find_first_of(".einn") == std::string::npos) s += ".0";
  return s;
}

Tensor run_instr(const Instr& in, const std::vector<Tensor>& values) {
  const Tensor& a = values.at(static_cast<size_t>(in.operands.at(0)));
  auto operand = [&](size_t i) -> const Tensor& {
    return values.at(static_cast<size_t>(in.operands.at(i)));
  };
  const auto& n = in.ints;
  const double x = in.number;
  const bool keep = x != 0;
  switch (in.op) {
    case Op::neg:
      return a.neg();
    case Op::abs:
      return a.abs();
    case Op::sign:
      return a.sign();
    case Op::relu:
      return a.relu();
    case Op::clamp:
      return a.clamp(-x, x);
    case Op::pow_scalar:
      return a.pow(x);
    case Op::add_scalar:
      return a + x;
    case Op::mul_scalar:
      return a * x;
    case Op::rsub_scalar:
      return x - a;
    case Op::div_scalar:
      return a / x;
    case Op::math: {
      const MathForm f = math_form(math_kind(in));
      return math_call(math_kind(in), into(a, f.lo[0], f.hi[0]));
    }
    case Op::math2: {
      const MathForm f = math_form(math_kind(in));
      return math_call(math_kind(in), into(a, f.lo[0], f.hi[0]),
                       into(operand(1), f.lo[1], f.hi[1]));
    }
    case Op::add:
      return a + operand(1);
    case Op::sub:
      return a - operand(1);
    case Op::mul:
      return a * operand(1);
    case Op::div_safe:
      return a / (operand(1).abs() + 0.5);
    case Op::maximum:
      return a.maximum(operand(1));
    case Op::minimum:
      return a.minimum(operand(1));
    case Op::pow_safe:
      return (a.abs() + 0.5).pow(operand(1));
    case Op::add_alpha:
      return a.add(operand(1), x);
    case Op::gt:
      return a > operand(1);
    case Op::lt:
      return a < operand(1);
    case Op::ge:
      return a >= operand(1);
    case Op::le:
      return a <= operand(1);
    case Op::ne:
      return a != operand(1);
    case Op::gt_scalar:
      return a > x;
    case Op::logical_not:
      return a.logical_not();
    case Op::where:
      return where(a, operand(1), operand(2));
    case Op::sum_all:
      return a.sum();
    case Op::sum_dims:
      return a.sum(n, keep);
    case Op::mean_all:
      return a.mean();
    case Op::mean_dims:
      return a.mean(n, keep);
    case Op::max_all:
      return a.max();
    case Op::max_dim:
      return std::get<0>(a.max(n.at(0), keep));
    case Op::min_dim:
      return std::get<0>(a.min(n.at(0), keep));
    case Op::amax:
      return a.amax(n, keep);
    case Op::amin:
      return a.amin(n, keep);
    case Op::var_dims:
      return a.var(n, /*unbiased=*/(static_cast<int>(x) & 2) != 0, (static_cast<int>(x) & 1) != 0);
    case Op::softmax:
      return a.softmax(n.at(0));
    case Op::log_softmax:
      return a.log_softmax(n.at(0));
    case Op::cumsum:
      return a.cumsum(n.at(0));
    case Op::cumprod_tanh:
      return a.tanh().cumprod(n.at(0));
    case Op::logcumsumexp:
      return a.logcumsumexp(n.at(0));
    case Op::sort_values:
      if (n.at(1) < a.size(n.at(0))) return std::get<0>(a.topk(n.at(1), n.at(0), x != 0));
      return std::get<0>(a.sort(n.at(0), x != 0));
    case Op::index_select: {
      const std::vector<double> index(n.begin() + 1, n.end());
      return a.index_select(n.at(0),
                            from_vector(index, {static_cast<int64_t>(index.size())}, kInt64));
    }
    case Op::reshape:
      return a.reshape(n);
    case Op::permute:
      return a.permute(n);
    case Op::transpose:
      return a.transpose(n.at(0), n.at(1));
    case Op::t:
      return a.t();
    case Op::slice:
      return a.slice(n.at(0), n.at(1), n.at(2), n.at(3));
    case Op::expand:
      return a.expand(n);
    case Op::squeeze_all:
      return a.squeeze();
    case Op::squeeze_dim:
      return a.squeeze(n.at(0));
    case Op::unsqueeze:
      return a.unsqueeze(n.at(0));
    case Op::narrow:
      return a.narrow(n.at(0), n.at(1), n.at(2));
    case Op::select:
      return a.select(n.at(0), n.at(1));
    case Op::flatten:
      return a.flatten();
    case Op::clone:
      return a.clone();
    case Op::matmul:
      return a.matmul(operand(1));
    case Op::matmul_self:
      return a.matmul(n.at(0) == 1 ? a : a.transpose(-1, -2));
    case Op::attention:
      return nn::functional::scaled_dot_product_attention(
          a, operand(1), operand(2), {}, 0.0, n.at(0) != 0,
          n.at(1) != 0 ? std::optional<double>(x) : std::nullopt);
    case Op::adaptive: {
      const Tensor b = operand(1);
      const std::vector<double> t(n.begin(), n.end());
      return nn::functional::adaptive_log_softmax_with_loss(
                 a, from_vector(t, {static_cast<int64_t>(t.size())}, kInt64),
                 a.t().matmul(a).tanh(), Tensor(),
                 nn::functional::AdaptiveTail{{b.tanh(), b.matmul(b.t()).tanh()}})
          .output;
    }
    case Op::index_adv:
      return a.index(index_entries(n));
    case Op::movedim: {
      const size_t k = static_cast<size_t>(n.at(0));
      return a.movedim(ints_at(n, 1, k), ints_at(n, 1 + k, k));
    }
    case Op::tensordot: {
      const size_t k = static_cast<size_t>(n.at(0));
      return tensordot(a, operand(1), ints_at(n, 1, k), ints_at(n, 1 + k, k));
    }
    case Op::rot90:
      return a.rot90(n.at(0), {n.at(1), n.at(2)});
    case Op::diag:
      return a.diag(n.at(0));
    case Op::diagonal:
      return a.diagonal(n.at(0), n.at(1), n.at(2));
    case Op::trace:
      return a.trace();
    case Op::cross:
      return a.cross(operand(1), n.at(0));
    case Op::kron:
      return a.kron(operand(1));
    case Op::unfold:
      return a.unfold(n.at(0), n.at(1), n.at(2));
    case Op::tile:
      return a.tile(n);
    case Op::diff:
      return a.diff(n.at(0), n.at(1));
    case Op::cdist:
      return cdist(a, operand(1), x);
    case Op::logit:
      return x != 0 ? a.logit(x) : into(a, 0.05, 0.95).logit();
    case Op::xlogy:
      return a.xlogy(into(operand(1), 0.125, 4));
    case Op::lerp:
      return a.lerp(operand(1), operand(2));
    case Op::lerp_scalar:
      return a.lerp(operand(1), x);
    case Op::addcmul:
      return a.addcmul(operand(1), operand(2), x);
    case Op::addcdiv:
      return a.addcdiv(operand(1), operand(2).abs() + 0.5, x);
    case Op::median:
      return n.empty() ? a.median() : std::get<0>(a.median(n.at(0), keep));
    case Op::std_mean: {
      auto [sd, mean] = std_mean(a, n, (static_cast<int>(x) & 2) != 0, (static_cast<int>(x) & 1) != 0);
      return sd + mean;
    }
    case Op::var_mean: {
      auto [var, mean] = var_mean(a, n, (static_cast<int>(x) & 2) != 0, (static_cast<int>(x) & 1) != 0);
      return var + mean;
    }
    case Op::vector_norm:
      return linalg::vector_norm(a, x, ints_at(n, 1, n.size() - 1), n.at(0) != 0);
    case Op::matrix_norm:
      return matrix_norm_call(a, x, {n.at(1), n.at(2)}, n.at(0) != 0);
    case Op::take: {
      size_t at = 0;
      return a.take(index_tensor(n, at));
    }
    case Op::searchsorted:
      return searchsorted(std::get<0>(a.sort(-1)), operand(1), false, x != 0).to(a.dtype());
    case Op::bucketize:
      return bucketize(operand(1), std::get<0>(a.flatten().sort(0)), false, x != 0).to(a.dtype());
    case Op::addr:
      return a.addr(operand(1), operand(2), x, n.at(0));
    case Op::addmv:
      return a.addmv(operand(1), operand(2), x, n.at(0));
    case Op::index_fill: {
      const std::vector<double> index(n.begin() + 1, n.end());
      return a.index_fill(n.at(0), from_vector(index, {int64_t(index.size())}, kInt64), x);
    }
    case Op::index_copy: {
      const std::vector<double> index(n.begin() + 1, n.end());
      return a.index_copy(n.at(0), from_vector(index, {int64_t(index.size())}, kInt64),
                          copy_source(a, operand(1), n.at(0), int64_t(index.size())));
    }
    case Op::copysign:
      return a.copysign(operand(1));
    case Op::sinc:
      return a.sinc();
    case Op::nanmean:
      return a.nanmean(n, keep);
    case Op::aminmax: {
      auto [lo, hi] = a.aminmax(n.empty() ? std::nullopt : std::optional<int64_t>(n[0]), keep);
      return lo + hi;
    }
    case Op::repeat_interleave:
      return a.repeat_interleave(n.at(0), n.size() > 1 ? std::optional<int64_t>(n[1]) : std::nullopt);
    case Op::baddbmm:
      return a.baddbmm(operand(1), n.at(1) != 0 ? operand(2).transpose(1, 2) : operand(2), x, n.at(0));
    case Op::nan_to_num:
      return nan_to_num_call(a, n.at(0));
    case Op::histc:
      return a.histc(n.at(0), -x, x);
    case Op::cat:
      return cat(all_operands(in, values), n.at(0));
    case Op::block_diag:
      return block_diag(all_operands(in, values));
    case Op::meshgrid:
      return grids_sum(all_operands(in, values), n.at(0) != 0);
    case Op::cartesian_prod:
      return cartesian_prod(all_operands(in, values));
    case Op::combinations:
      return combinations(a, n.at(0), n.at(1) != 0);
    case Op::detach:
      return a.detach();
    // In place: the handle shares the operand's storage.
    case Op::add_:
      return Tensor(a).add_(operand(1));
    case Op::sub_:
      return Tensor(a).sub_(operand(1));
    case Op::mul_:
      return Tensor(a).mul_(operand(1));
    case Op::add_scalar_:
      return Tensor(a).add_(x);
    case Op::mul_scalar_:
      return Tensor(a).mul_(x);
    case Op::relu_:
      return Tensor(a).relu_();
    case Op::index_put_: {
      const Tensor src = (static_cast<int>(x) & 2) != 0 ? operand(1).mean() : operand(1);
      return Tensor(a).index_put_(put_indices(n), src, (static_cast<int>(x) & 1) != 0);
    }
    case Op::nograd_begin:
    case Op::nograd_end:
      break;
  }
  return Tensor();
}

std::string cpp(const Instr& in, const std::vector<std::string>& names) {
  auto v = [&](size_t i) { return names.at(static_cast<size_t>(in.operands.at(i))); };
  const std::string a = in.operands.empty() ? "" : v(0);
  const auto& n = in.ints;
  const std::string x = number_literal(in.number);
  const std::string keep = flag(in.number != 0);
  auto i = [&](size_t k) { return std::to_string(n.at(k)); };
  switch (in.op) {
    case Op::neg:
      return a + ".neg()";
    case Op::abs:
      return a + ".abs()";
    case Op::sign:
      return a + ".sign()";
    case Op::relu:
      return a + ".relu()";
    case Op::clamp:
      return a + ".clamp(-" + x + ", " + x + ")";
    case Op::pow_scalar:
      return a + ".pow(" + x + ")";
    case Op::add_scalar:
      return a + " + " + x;
    case Op::mul_scalar:
      return a + " * " + x;
    case Op::rsub_scalar:
      return x + " - " + a;
    case Op::div_scalar:
      return a + " / " + x;
    case Op::math: {
      const MathForm f = math_form(math_kind(in));
      return into_cpp(a, f.lo[0], f.hi[0]) + "." + op_name(math_kind(in)) + "()";
    }
    case Op::math2: {
      const MathForm f = math_form(math_kind(in));
      return into_cpp(a, f.lo[0], f.hi[0]) + "." + op_name(math_kind(in)) + "(" +
             into_cpp(v(1), f.lo[1], f.hi[1]) + ")";
    }
    case Op::add:
      return a + " + " + v(1);
    case Op::sub:
      return a + " - " + v(1);
    case Op::mul:
      return a + " * " + v(1);
    case Op::div_safe:
      return a + " / (" + v(1) + ".abs() + 0.5)";
    case Op::maximum:
      return a + ".maximum(" + v(1) + ")";
    case Op::minimum:
      return a + ".minimum(" + v(1) + ")";
    case Op::pow_safe:
      return "(" + a + ".abs() + 0.5).pow(" + v(1) + ")";
    case Op::add_alpha:
      return a + ".add(" + v(1) + ", " + x + ")";
    case Op::gt:
      return a + " > " + v(1);
    case Op::lt:
      return a + " < " + v(1);
    case Op::ge:
      return a + " >= " + v(1);
    case Op::le:
      return a + " <= " + v(1);
    case Op::ne:
      return a + " != " + v(1);
    case Op::gt_scalar:
      return a + " > " + x;
    case Op::logical_not:
      return a + ".logical_not()";
    case Op::where:
      return "where(" + a + ", " + v(1) + ", " + v(2) + ")";
    case Op::sum_all:
      return a + ".sum()";
    case Op::sum_dims:
      return a + ".sum(" + list(n) + ", " + keep + ")";
    case Op::mean_all:
      return a + ".mean()";
    case Op::mean_dims:
      return a + ".mean(" + list(n) + ", " + keep + ")";
    case Op::max_all:
      return a + ".max()";
    case Op::max_dim:
      return "std::get<0>(" + a + ".max(" + i(0) + ", " + keep + "))";
    case Op::min_dim:
      return "std::get<0>(" + a + ".min(" + i(0) + ", " + keep + "))";
    case Op::amax:
      return a + ".amax(" + list(n) + ", " + keep + ")";
    case Op::amin:
      return a + ".amin(" + list(n) + ", " + keep + ")";
    case Op::var_dims:
      return a + ".var(" + list(n) + ", " + flag((static_cast<int>(in.number) & 2) != 0) + ", " +
             flag((static_cast<int>(in.number) & 1) != 0) + ")";
    case Op::softmax:
      return a + ".softmax(" + i(0) + ")";
    case Op::log_softmax:
      return a + ".log_softmax(" + i(0) + ")";
    case Op::cumsum:
      return a + ".cumsum(" + i(0) + ")";
    case Op::cumprod_tanh:
      return a + ".tanh().cumprod(" + i(0) + ")";
    case Op::logcumsumexp:
      return a + ".logcumsumexp(" + i(0) + ")";
    case Op::sort_values:
      return "std::get<0>(" + a + ".topk(" + i(1) + ", " + i(0) + ", " + flag(in.number != 0) +
             "))";
    case Op::index_select:
      return a + ".index_select(" + i(0) + ", tensor(" + list(n, 1) + "))";
    case Op::reshape:
      return a + ".reshape(" + list(n) + ")";
    case Op::permute:
      return a + ".permute(" + list(n) + ")";
    case Op::transpose:
      return a + ".transpose(" + i(0) + ", " + i(1) + ")";
    case Op::t:
      return a + ".t()";
    case Op::slice:
      return a + ".slice(" + i(0) + ", " + i(1) + ", " + i(2) + ", " + i(3) + ")";
    case Op::expand:
      return a + ".expand(" + list(n) + ")";
    case Op::squeeze_all:
      return a + ".squeeze()";
    case Op::squeeze_dim:
      return a + ".squeeze(" + i(0) + ")";
    case Op::unsqueeze:
      return a + ".unsqueeze(" + i(0) + ")";
    case Op::narrow:
      return a + ".narrow(" + i(0) + ", " + i(1) + ", " + i(2) + ")";
    case Op::select:
      return a + ".select(" + i(0) + ", " + i(1) + ")";
    case Op::flatten:
      return a + ".flatten()";
    case Op::clone:
      return a + ".clone()";
    case Op::matmul:
      return a + ".matmul(" + v(1) + ")";
    case Op::matmul_self:
      return a + ".matmul(" + a + (in.ints.at(0) == 1 ? "" : ".transpose(-1, -2)") + ")";
    case Op::attention:
      return "nn::functional::scaled_dot_product_attention(" + a + ", " + v(1) + ", " + v(2) +
             ", {}, 0.0, " + flag(in.ints.at(0) != 0) + (in.ints.at(1) != 0 ? ", " + x : "") + ")";
    case Op::adaptive:
      return "nn::functional::adaptive_log_softmax_with_loss(" + a + ", tensor(" + list(n) + "), " +
             a + ".t().matmul(" + a + ").tanh(), {}, {{" + v(1) + ".tanh(), " + v(1) + ".matmul(" +
             v(1) + ".t()).tanh()}}).output";
    case Op::index_adv:
      return a + ".index(" + index_entries_cpp(n) + ")";
    case Op::movedim: {
      const size_t k = static_cast<size_t>(n.at(0));
      return a + ".movedim(" + list(ints_at(n, 1, k)) + ", " + list(ints_at(n, 1 + k, k)) + ")";
    }
    case Op::tensordot: {
      const size_t k = static_cast<size_t>(n.at(0));
      return "tensordot(" + a + ", " + v(1) + ", " + list(ints_at(n, 1, k)) + ", " +
             list(ints_at(n, 1 + k, k)) + ")";
    }
    case Op::rot90:
      return a + ".rot90(" + i(0) + ", {" + i(1) + ", " + i(2) + "})";
    case Op::diag:
      return a + ".diag(" + i(0) + ")";
    case Op::diagonal:
      return a + ".diagonal(" + i(0) + ", " + i(1) + ", " + i(2) + ")";
    case Op::trace:
      return a + ".trace()";
    case Op::cross:
      return a + ".cross(" + v(1) + ", " + i(0) + ")";
    case Op::kron:
      return a + ".kron(" + v(1) + ")";
    case Op::unfold:
      return a + ".unfold(" + i(0) + ", " + i(1) + ", " + i(2) + ")";
    case Op::tile:
      return a + ".tile(" + list(n) + ")";
    case Op::diff:
      return a + ".diff(" + i(0) + ", " + i(1) + ")";
    case Op::cdist:
      return "cdist(" + a + ", " + v(1) + ", " + x + ")";
    case Op::logit:
      return in.number != 0 ? a + ".logit(" + x + ")" : into_cpp(a, 0.05, 0.95) + ".logit()";
    case Op::xlogy:
      return a + ".xlogy(" + into_cpp(v(1), 0.125, 4) + ")";
    case Op::lerp:
      return a + ".lerp(" + v(1) + ", " + v(2) + ")";
    case Op::lerp_scalar:
      return a + ".lerp(" + v(1) + ", " + x + ")";
    case Op::addcmul:
      return a + ".addcmul(" + v(1) + ", " + v(2) + ", " + x + ")";
    case Op::addcdiv:
      return a + ".addcdiv(" + v(1) + ", " + v(2) + ".abs() + 0.5, " + x + ")";
    case Op::median:
      return n.empty() ? a + ".median()" : "std::get<0>(" + a + ".median(" + i(0) + ", " + keep + "))";
    case Op::std_mean:
    case Op::var_mean: {
      const char* f = in.op == Op::std_mean ? "std_mean" : "var_mean";
      return std::string("std::apply(std::plus<>(), ") + f + "(" + a + ", " + list(n) + ", " +
             flag((static_cast<int>(in.number) & 2) != 0) + ", " +
             flag((static_cast<int>(in.number) & 1) != 0) + "))";
    }
    case Op::vector_norm:
      return "linalg::vector_norm(" + a + ", " + ord_cpp(in.number) + ", " + list(n, 1) + ", " +
             flag(n.at(0) != 0) + ")";
    case Op::matrix_norm:
      return "linalg::matrix_norm(" + a + ", " +
             (in.number == 0 ? std::string("\"fro\"") : ord_cpp(in.number)) + ", {" + i(1) + ", " +
             i(2) + "}, " + flag(n.at(0) != 0) + ")";
    case Op::take: {
      size_t at = 0;
      return a + ".take(" + index_tensor_cpp(n, at) + ")";
    }
    case Op::searchsorted:
      return "searchsorted(std::get<0>(" + a + ".sort(-1)), " + v(1) + ", false, " +
             flag(in.number != 0) + ").to(" + a + ".dtype())";
    case Op::bucketize:
      return "bucketize(" + v(1) + ", std::get<0>(" + a + ".flatten().sort(0)), false, " +
             flag(in.number != 0) + ").to(" + a + ".dtype())";
    case Op::addr:
      return a + ".addr(" + v(1) + ", " + v(2) + ", " + x + ", " + i(0) + ")";
    case Op::addmv:
      return a + ".addmv(" + v(1) + ", " + v(2) + ", " + x + ", " + i(0) + ")";
    case Op::index_fill:
      return a + ".index_fill(" + i(0) + ", tensor(" + list(n, 1) + "), " + x + ")";
    case Op::index_copy:
      return a + ".index_copy(" + i(0) + ", tensor(" + list(n, 1) + "), " +
             copy_source_cpp(a, v(1), n.at(0), int64_t(n.size()) - 1) + ")";
    case Op::copysign:
      return a + ".copysign(" + v(1) + ")";
    case Op::sinc:
      return a + ".sinc()";
    case Op::nanmean:
      return a + ".nanmean(" + list(n) + ", " + keep + ")";
    case Op::aminmax:
      return "std::apply(std::plus<>(), " + a + ".aminmax(" + (n.empty() ? "std::nullopt" : i(0)) +
             ", " + keep + "))";
    case Op::repeat_interleave:
      return a + ".repeat_interleave(" + i(0) + (n.size() > 1 ? ", " + i(1) : "") + ")";
    case Op::baddbmm:
      return a + ".baddbmm(" + v(1) + ", " + v(2) + (n.at(1) != 0 ? ".transpose(1, 2)" : "") +
             ", " + x + ", " + i(0) + ")";
    case Op::nan_to_num:
      return nan_to_num_cpp(a, n.at(0));
    case Op::histc:
      return a + ".histc(" + i(0) + ", " + number_literal(-in.number) + ", " + x + ")";
    case Op::cat:
      return "cat(" + all_operands_cpp(in, names) + ", " + i(0) + ")";
    case Op::block_diag:
      return "block_diag(" + all_operands_cpp(in, names) + ")";
    case Op::meshgrid:
      return "[&] { Tensor r; for (const Tensor& g : meshgrid(" + all_operands_cpp(in, names) +
             ", \"" + (n.at(0) != 0 ? "xy" : "ij") +
             "\")) r = r.defined() ? r + g : g; return r; }()";
    case Op::cartesian_prod:
      return "cartesian_prod(" + all_operands_cpp(in, names) + ")";
    case Op::combinations:
      return "combinations(" + a + ", " + i(0) + ", " + flag(n.at(1) != 0) + ")";
    case Op::detach:
      return a + ".detach()";
    case Op::add_:
      return a + ".add_(" + v(1) + ")";
    case Op::sub_:
      return a + ".sub_(" + v(1) + ")";
    case Op::mul_:
      return a + ".mul_(" + v(1) + ")";
    case Op::add_scalar_:
      return a + ".add_(" + x + ")";
    case Op::mul_scalar_:
      return a + ".mul_(" + x + ")";
    case Op::relu_:
      return a + ".relu_()";
    case Op::index_put_:
      return a + ".index_put_(" + put_indices_cpp(n) + ", " + v(1) +
             ((static_cast<int>(in.number) & 2) != 0 ? ".mean()" : "") + ", " +
             flag((static_cast<int>(in.number) & 1) != 0) + ")";
    case Op::nograd_begin:
    case Op::nograd_end:
      break;
  }
  return "";
}

}  // namespace kiln::fuzz
