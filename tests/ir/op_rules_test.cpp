// The op table and every op's type rule (infer_type), table-driven.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "ir/error.h"
#include "ir/op.h"
#include "ir_test_util.h"

using namespace kiln;
using test::ty;

namespace {

using I = std::vector<int64_t>;

Attrs reduce_attrs(I dims, int64_t keepdim) {
  return Attrs{{AttrKey::dims, std::move(dims)}, {AttrKey::keepdim, keepdim}};
}
Attrs slice_attrs(int64_t dim, int64_t start, int64_t end, int64_t step) {
  return Attrs{
      {AttrKey::dim, dim}, {AttrKey::start, start}, {AttrKey::end, end}, {AttrKey::step, step}};
}
Attrs pad_attrs(int64_t dim, int64_t low, int64_t high, int64_t interior) {
  return Attrs{{AttrKey::dim, dim},
               {AttrKey::low, low},
               {AttrKey::high, high},
               {AttrKey::interior, interior}};
}

// One infer_type case: the result type, or (when `error` is set) a substring of the error.
struct Case {
  OpKind op;
  std::vector<TensorType> in;
  Attrs attrs;
  TensorType want;
  const char* error = nullptr;
};

const TensorType f23 = ty(DType::f32, {2, 3});
const TensorType i23 = ty(DType::i32, {2, 3});
const TensorType b23 = ty(DType::b8, {2, 3});

std::vector<Case> cases() {
  std::vector<Case> c;
  // Given types.
  for (OpKind k : all_ops()) {
    OpCategory cat = op_info(k).category;
    if (cat == OpCategory::Input || cat == OpCategory::Creation || cat == OpCategory::Custom)
      c.push_back({k, {}, {}, {}, "infer_type cannot derive it"});
  }
  // Unary.
  for (OpKind k : {OpKind::neg, OpKind::abs, OpKind::relu}) {
    c.push_back({k, {f23}, {}, f23});
    c.push_back({k, {i23}, {}, i23});
    c.push_back({k, {b23}, {}, {}, "expected a numeric tensor, got bool"});
  }
  c.push_back({OpKind::sign, {b23}, {}, b23});
  c.push_back({OpKind::sign, {i23}, {}, i23});
  // Math ops, unary or binary (each operand the same type here; binary ones also
  // broadcast and promote).
  for (OpKind k : all_ops()) {
    if (!is_math(k)) continue;
    const size_t n = size_t(op_info(k).arity);
    c.push_back({k, std::vector<TensorType>(n, i23), {}, f23});
    c.push_back({k, std::vector<TensorType>(n, ty(DType::f64, {4})), {}, ty(DType::f64, {4})});
    c.push_back({k, std::vector<TensorType>(n, b23), {}, f23});
    if (n == 2) {
      c.push_back({k, {i23, ty(DType::f64, {3})}, {}, ty(DType::f64, {2, 3})});
      c.push_back({k, {ty(DType::f32, {2, 1}), ty(DType::f32, {3})}, {}, f23});
      c.push_back({k, {f23, ty(DType::f32, {4})}, {}, {}, "shapes [2,3] and [4] cannot be broadcast"});
    }
  }
  c.push_back({OpKind::logical_not, {f23}, {}, b23});
  // Composites: their expansion's type (decompose_test.cpp).
  for (OpKind k : all_ops())
    if (is_composite(k)) {
      c.push_back({k, {i23}, {}, f23});
      c.push_back({k, {ty(DType::f64, {4})}, {}, ty(DType::f64, {4})});
    }
  c.push_back({OpKind::softsign, {b23}, {}, {}, "abs: expected a numeric tensor, got bool"});
  // philox: float32 draws from any key and counter, broadcast.
  c.push_back({OpKind::philox, {ty(DType::i64, {}), ty(DType::i64, {2, 3})}, {}, f23});
  c.push_back({OpKind::philox, {ty(DType::i32, {3}), ty(DType::f64, {2, 1})}, {}, ty(DType::f32, {2, 3})});
  // ... float64 (53 random bits), all 64 bits, or integers in [low, high).
  const std::vector<TensorType> kc = {ty(DType::i64, {}), ty(DType::i64, {2, 3})};
  c.push_back({OpKind::philox, kc, Attrs{{AttrKey::dtype, DType::f64}}, ty(DType::f64, {2, 3})});
  c.push_back({OpKind::philox, kc, Attrs{{AttrKey::dtype, DType::i64}}, kc[1]});
  c.push_back({OpKind::philox, kc,
               Attrs{{AttrKey::dtype, DType::i64}, {AttrKey::low, INT64_MIN}, {AttrKey::high, INT64_MAX}},
               kc[1]});
  c.push_back({OpKind::philox, kc, Attrs{{AttrKey::dtype, DType::i32}}, {},
               "philox: expected dtype f32, f64 or i64, got i32"});
  c.push_back({OpKind::philox, kc, Attrs{{AttrKey::low, int64_t{0}}, {AttrKey::high, int64_t{4}}}, {},
               "philox: low and high bound an i64 draw, got dtype f32"});
  c.push_back({OpKind::philox, kc,
               Attrs{{AttrKey::dtype, DType::i64}, {AttrKey::low, int64_t{4}}, {AttrKey::high, int64_t{4}}},
               {}, "philox: expected low < high, got [4, 4)"});
  c.push_back({OpKind::philox, kc, Attrs{{AttrKey::dtype, DType::i64}, {AttrKey::low, int64_t{0}}}, {},
               "attribute 'high' is missing"});
  c.push_back({OpKind::cast, {f23}, Attrs{{AttrKey::dtype, DType::i64}}, ty(DType::i64, {2, 3})});
  c.push_back({OpKind::cast, {f23}, {}, {}, "attribute 'dtype' is missing"});
  c.push_back({OpKind::neg, {f23, f23}, {}, {}, "neg: expected 1 operand, got 2"});
  // Binary.
  for (OpKind k :
       {OpKind::add, OpKind::sub, OpKind::mul, OpKind::pow, OpKind::fmod, OpKind::remainder,
        OpKind::maximum, OpKind::minimum}) {
    c.push_back({k, {ty(DType::i64, {3, 1}), ty(DType::f32, {4})}, {}, ty(DType::f32, {3, 4})});
    c.push_back({k, {i23, ty(DType::i64, {})}, {}, ty(DType::i64, {2, 3})});
    c.push_back(
        {k, {f23, ty(DType::f32, {4})}, {}, {}, "shapes [2,3] and [4] cannot be broadcast"});
  }
  c.push_back({OpKind::add, {b23, b23}, {}, b23});
  c.push_back({OpKind::add, {f23}, {}, {}, "add: expected 2 operands, got 1"});
  c.push_back(
      {OpKind::add,
       {f23, ty(DType::f32, {2, 3}, Device(kCUDA))},
       {},
       {},
       "add: expected all operands on one device, got cpu (operand 0) and cuda:0 (operand 1)"});
  c.push_back({OpKind::div, {i23, i23}, {}, f23});
  c.push_back({OpKind::logaddexp, {i23, ty(DType::f64, {3})}, {}, ty(DType::f64, {2, 3})});
  // Scans: the operand's shape; integers and bools add and multiply up in int64.
  const Attrs along1{{AttrKey::dim, int64_t{1}}, {AttrKey::reverse, int64_t{0}}};
  c.push_back({OpKind::cumsum, {f23}, along1, f23});
  c.push_back({OpKind::cumsum, {ty(DType::i32, {2, 3})}, along1, ty(DType::i64, {2, 3})});
  c.push_back({OpKind::cumprod, {b23}, along1, ty(DType::i64, {2, 3})});
  c.push_back({OpKind::logcumsumexp, {i23}, along1, f23});
  c.push_back({OpKind::cumsum, {f23}, Attrs{{AttrKey::dim, int64_t{2}}}, {}, "dim 2 is out of range"});
  c.push_back({OpKind::div, {ty(DType::f64, {}), i23}, {}, ty(DType::f64, {2, 3})});
  for (OpKind k : {OpKind::eq, OpKind::ne, OpKind::lt, OpKind::le, OpKind::gt, OpKind::ge,
                   OpKind::logical_and, OpKind::logical_or})
    c.push_back({k, {f23, ty(DType::i32, {3})}, {}, b23});
  // Ternary.
  c.push_back(
      {OpKind::where, {ty(DType::b8, {2, 1}), ty(DType::i32, {3}), ty(DType::f32, {})}, {}, f23});
  c.push_back(
      {OpKind::where, {f23, f23, f23}, {}, {}, "where: expected a bool condition, got f32"});
  c.push_back({OpKind::where,
               {b23, f23, ty(DType::f32, {4})},
               {},
               {},
               "shapes [2,3], [2,3] and [4] cannot be broadcast"});
  // Reductions.
  c.push_back({OpKind::sum, {f23}, reduce_attrs({1}, 0), ty(DType::f32, {2})});
  c.push_back({OpKind::sum, {f23}, reduce_attrs({-1, 0}, 1), ty(DType::f32, {1, 1})});
  c.push_back({OpKind::sum, {f23}, reduce_attrs({}, 0), f23});  // an empty list reduces nothing
  c.push_back({OpKind::sum, {i23}, reduce_attrs({0, 1}, 0), ty(DType::i64, {})});
  c.push_back({OpKind::sum, {b23}, reduce_attrs({0}, 0), ty(DType::i64, {3})});
  c.push_back({OpKind::sum,
               {f23},
               reduce_attrs({2}, 0),
               {},
               "sum: dim 2 is out of range for a tensor of rank 2"});
  c.push_back({OpKind::sum, {f23}, Attrs{}, {}, "sum: attribute 'dims' is missing"});
  c.push_back({OpKind::max, {i23}, reduce_attrs({0}, 1), ty(DType::i32, {1, 3})});
  c.push_back({OpKind::min, {f23}, reduce_attrs({1}, 0), ty(DType::f32, {2})});
  c.push_back({OpKind::argmax,
               {f23},
               Attrs{{AttrKey::dim, int64_t{1}}, {AttrKey::keepdim, int64_t{0}}},
               ty(DType::i64, {2})});
  c.push_back({OpKind::argmin,
               {f23},
               Attrs{{AttrKey::dim, int64_t{-2}}, {AttrKey::keepdim, int64_t{1}}},
               ty(DType::i64, {1, 3})});
  c.push_back({OpKind::argmax, {f23}, Attrs{{AttrKey::dim, int64_t{5}}}, {}, "out of range"});
  // Checks: integer indices and a bound; the type is the operand's.
  const Attrs bound{{AttrKey::high, int64_t{3}}, {AttrKey::name, std::string("cross_entropy")}};
  c.push_back({OpKind::check_index, {i23}, bound, i23});
  c.push_back({OpKind::check_index, {f23}, bound, {}, "expected integer indices, got f32"});
  c.push_back({OpKind::check_index,
               {i23},
               Attrs{{AttrKey::high, int64_t{-1}}, {AttrKey::name, std::string("x")}},
               {},
               "expected a bound (high) >= 0, got -1"});
  // gather and scatter_add: integer indices of the data's rank, no larger outside dim.
  const Attrs dim0{{AttrKey::dim, int64_t{0}}};
  c.push_back({OpKind::gather, {f23, ty(DType::i64, {5, 3})}, dim0, ty(DType::f32, {5, 3})});
  c.push_back({OpKind::gather, {f23, ty(DType::i32, {1, 2})}, Attrs{{AttrKey::dim, int64_t{-1}}}, ty(DType::f32, {1, 2})});
  c.push_back({OpKind::gather, {f23, f23}, dim0, {}, "expected integer indices, got f32"});
  c.push_back({OpKind::gather, {f23, ty(DType::i64, {2, 4})}, dim0, {}, "larger than the input [2,3] in dim 1"});
  c.push_back({OpKind::gather, {f23, ty(DType::i64, {6})}, dim0, {}, "as many dims as the input (2)"});
  c.push_back({OpKind::scatter_add, {f23, ty(DType::i64, {4, 3}), ty(DType::f32, {4, 3})}, dim0, f23});
  c.push_back({OpKind::scatter_add, {f23, ty(DType::i64, {4, 3}), ty(DType::f64, {4, 3})}, dim0, {},
               "expected a source of the base's dtype f32, got f64"});
  c.push_back({OpKind::scatter_add, {f23, ty(DType::i64, {4, 3}), f23}, dim0, {},
               "expected a source of the indices' shape [4,3], got [2,3]"});
  // argsort: int64 positions, `count` of them along dim.
  const auto sorted = [](int64_t dim, int64_t count) {
    return Attrs{{AttrKey::dim, dim}, {AttrKey::descending, int64_t{1}}, {AttrKey::count, count}};
  };
  c.push_back({OpKind::argsort, {f23}, sorted(1, 3), ty(DType::i64, {2, 3})});
  c.push_back({OpKind::argsort, {f23}, sorted(-2, 1), ty(DType::i64, {1, 3})});
  c.push_back({OpKind::argsort, {ty(DType::f32, {})}, sorted(0, 1), ty(DType::i64, {})});
  c.push_back({OpKind::argsort, {f23}, sorted(1, 4), {}, "expected a count in [0, 3] (the size of dim 1), got 4"});
  c.push_back({OpKind::argsort, {f23}, sorted(2, 1), {}, "out of range"});
  // attention: [.., L, E] x [.., S, E] x [.., S, Ev] -> [.., L, Ev].
  const Attrs att{{AttrKey::scale, 0.5}, {AttrKey::causal, int64_t{1}}};
  const TensorType aq = ty(DType::f32, {2, 4, 3}), ak = ty(DType::f32, {2, 5, 3}), av = ty(DType::f32, {2, 5, 6}),
                   ao = ty(DType::f32, {2, 4, 6});
  c.push_back({OpKind::attention, {aq, ak, av}, att, ao});
  c.push_back({OpKind::attention, {aq, aq, av}, att, {}, "expected v as long as k (4), got [2,5,6]"});
  c.push_back({OpKind::attention, {aq, ty(DType::f32, {2, 5, 2}), av}, att, {}, "expected k as wide as q (3)"});
  c.push_back({OpKind::attention, {ty(DType::i64, {2, 4, 3}), ak, av}, att, {}, "expected floating-point q"});
  c.push_back({OpKind::attention, {aq, ty(DType::f32, {3, 5, 3}), av}, att, {}, "equal leading dims"});
  // attention_grad: the gradients its mask selects (1 q, 2 k, 4 v), flattened end to end.
  auto grads = [&](int64_t which) {
    Attrs a = att;
    a.set(AttrKey::which, which);
    return a;
  };
  c.push_back({OpKind::attention_grad, {aq, ak, av, ao, ao}, grads(1), ty(DType::f32, {24})});
  c.push_back({OpKind::attention_grad, {aq, ak, av, ao, ao}, grads(2), ty(DType::f32, {30})});
  c.push_back({OpKind::attention_grad, {aq, ak, av, ao, ao}, grads(4), ty(DType::f32, {60})});
  c.push_back({OpKind::attention_grad, {aq, ak, av, ao, ao}, grads(5), ty(DType::f32, {84})});
  c.push_back({OpKind::attention_grad, {aq, ak, av, ao, ao}, grads(7), ty(DType::f32, {114})});
  c.push_back({OpKind::attention_grad,
               {aq, ak, av, ao, ao},
               grads(0),
               {},
               "expected which a mask in 1..7"});
  c.push_back({OpKind::attention_grad,
               {aq, ak, av, ao, ao},
               grads(8),
               {},
               "expected which a mask in 1..7"});
  // cluster_logprob: h [N, H], w [C, H], int64 t [N] -> [N] of h's dtype.
  const Attrs cl{{AttrKey::start, int64_t{3}}};
  const TensorType ch = ty(DType::f32, {5, 4}), cw = ty(DType::f32, {7, 4}),
                   ct = ty(DType::i64, {5}), cg = ty(DType::f32, {5});
  c.push_back({OpKind::cluster_logprob, {ch, cw, ct}, cl, cg});
  c.push_back({OpKind::cluster_logprob,
               {ty(DType::f64, {5, 4}), ty(DType::f64, {7, 4}), ct},
               cl,
               ty(DType::f64, {5})});
  c.push_back({OpKind::cluster_logprob,
               {ty(DType::i64, {5, 4}), cw, ct},
               cl,
               {},
               "expected floating-point features h, got i64"});
  c.push_back({OpKind::cluster_logprob,
               {ch, ty(DType::f64, {7, 4}), ct},
               cl,
               {},
               "expected weights w of h's dtype f32, got f64"});
  c.push_back({OpKind::cluster_logprob,
               {ch, cw, ty(DType::i32, {5})},
               cl,
               {},
               "expected int64 targets t, got i32"});
  c.push_back({OpKind::cluster_logprob,
               {ch, ty(DType::f32, {7, 3}), ct},
               cl,
               {},
               "expected weights w as wide as h (4), got [7,3]"});
  c.push_back({OpKind::cluster_logprob,
               {ch, cw, ty(DType::i64, {4})},
               cl,
               {},
               "expected one target per row of h (5), got [4]"});
  c.push_back(
      {OpKind::cluster_logprob,
       {ty(DType::f32, {5}), cw, ct},
       cl,
       {},
       "expected features h [N, H], weights w [C, H] and targets t [N], got [5], [7,4] and [5]"});
  c.push_back({OpKind::cluster_logprob, {ch, cw, ct}, {}, {}, "start"});
  // cluster_logprob_grad: the gradients its mask selects (1 h, 2 w), flattened end to end.
  auto cluster_grads = [&](int64_t which) {
    Attrs a = cl;
    a.set(AttrKey::which, which);
    return a;
  };
  c.push_back(
      {OpKind::cluster_logprob_grad, {ch, cw, ct, cg}, cluster_grads(1), ty(DType::f32, {20})});
  c.push_back(
      {OpKind::cluster_logprob_grad, {ch, cw, ct, cg}, cluster_grads(2), ty(DType::f32, {28})});
  c.push_back(
      {OpKind::cluster_logprob_grad, {ch, cw, ct, cg}, cluster_grads(3), ty(DType::f32, {48})});
  c.push_back({OpKind::cluster_logprob_grad,
               {ch, cw, ct, cg},
               cluster_grads(4),
               {},
               "expected which a mask in 1..3 (1 h, 2 w), got 4"});
  c.push_back({OpKind::cluster_logprob_grad,
               {ch, cw, ct, ty(DType::f32, {5, 1})},
               cluster_grads(3),
               {},
               "expected an output gradient g of dtype f32 and shape [5], got f32[5,1]"});
  const Attrs divisor{{AttrKey::name, std::string("fmod")}};
  c.push_back({OpKind::check_nonzero, {i23}, divisor, i23});
  c.push_back({OpKind::check_nonzero, {f23}, divisor, {}, "expected an integer divisor, got f32"});
  const Attrs draw{{AttrKey::count, int64_t{2}}, {AttrKey::name, std::string("multinomial")}};
  c.push_back({OpKind::check_distribution, {f23}, draw, f23});
  c.push_back({OpKind::check_distribution, {i23}, draw, {}, "expected float weights, got i32"});
  c.push_back({OpKind::check_distribution, {ty(DType::f32, {})}, draw, {},
               "expected weights of rank >= 1, got a scalar"});
  c.push_back({OpKind::check_distribution,
               {f23},
               {{AttrKey::count, int64_t{-1}}, {AttrKey::name, std::string("multinomial")}},
               {},
               "expected a count >= 0, got -1"});
  // Collectives: the operand's type, all_gather and reduce_scatter along dim 0.
  const Attrs two{{AttrKey::reduce, std::string("sum")}, {AttrKey::world, int64_t{2}}};
  c.push_back({OpKind::all_reduce, {f23}, two, f23});
  c.push_back({OpKind::all_gather, {f23}, Attrs{{AttrKey::world, int64_t{2}}}, ty(DType::f32, {4, 3})});
  c.push_back({OpKind::reduce_scatter, {f23}, two, ty(DType::f32, {1, 3})});
  c.push_back({OpKind::broadcast, {i23}, Attrs{{AttrKey::root, int64_t{1}}, {AttrKey::world, int64_t{2}}}, i23});
  c.push_back({OpKind::all_reduce, {i23}, Attrs{{AttrKey::reduce, std::string("avg")}, {AttrKey::world, int64_t{2}}},
               {}, "floating-point tensor for reduce avg"});
  c.push_back({OpKind::reduce_scatter, {f23}, Attrs{{AttrKey::reduce, std::string("sum")}, {AttrKey::world, int64_t{4}}},
               {}, "divisible by the world size 4"});
  // Empty reductions: sum of nothing is 0; max, min, argmax and argmin of nothing are errors.
  const TensorType f03 = ty(DType::f32, {0, 3});
  c.push_back({OpKind::sum, {f03}, reduce_attrs({0}, 0), ty(DType::f32, {3})});
  c.push_back({OpKind::max,
               {f03},
               reduce_attrs({0}, 0),
               {},
               "max: expected reduction dim 0 to have a non-zero size, got input shape [0,3]"});
  c.push_back({OpKind::min, {f03}, reduce_attrs({1}, 0), ty(DType::f32, {0})});
  c.push_back({OpKind::min, {f03}, reduce_attrs({0, 1}, 0), {}, "non-zero size"});
  c.push_back({OpKind::argmin, {f03}, Attrs{{AttrKey::dim, int64_t{0}}}, {}, "non-zero size"});
  // Movement.
  c.push_back({OpKind::reshape, {f23}, Attrs{{AttrKey::shape, I{3, 2}}}, ty(DType::f32, {3, 2})});
  c.push_back({OpKind::reshape, {f23}, Attrs{{AttrKey::shape, I{-1}}}, ty(DType::f32, {6})});
  c.push_back({OpKind::reshape,
               {f23},
               Attrs{{AttrKey::shape, I{4, 2}}},
               {},
               "reshape: cannot reshape [2,3] to [4,2]"});
  c.push_back({OpKind::expand,
               {ty(DType::f32, {3, 1})},
               Attrs{{AttrKey::shape, I{2, 3, 4}}},
               ty(DType::f32, {2, 3, 4})});
  c.push_back({OpKind::expand,
               {ty(DType::f32, {3, 1})},
               Attrs{{AttrKey::shape, I{-1, 5}}},
               ty(DType::f32, {3, 5})});
  c.push_back({OpKind::expand,
               {ty(DType::f32, {3, 1})},
               Attrs{{AttrKey::shape, I{4, 4}}},
               {},
               "expand: cannot expand [3,1] to [4,4]: dim 0 has size 3, expected 1 or 4"});
  c.push_back(
      {OpKind::expand, {f23}, Attrs{{AttrKey::shape, I{3}}}, {}, "the target has fewer dims"});
  c.push_back({OpKind::permute,
               {ty(DType::f32, {2, 3, 4})},
               Attrs{{AttrKey::perm, I{2, 0, 1}}},
               ty(DType::f32, {4, 2, 3})});
  c.push_back({OpKind::permute,
               {f23},
               Attrs{{AttrKey::perm, I{0, 0}}},
               {},
               "permute: expected a permutation of 0..1 for a tensor of rank 2, got perm [0,0]"});
  c.push_back({OpKind::permute, {f23}, Attrs{{AttrKey::perm, I{0}}}, {}, "expected a permutation"});
  c.push_back(
      {OpKind::slice, {ty(DType::f32, {10})}, slice_attrs(0, 1, 8, 3), ty(DType::f32, {3})});
  c.push_back({OpKind::slice, {f23}, slice_attrs(-1, 1, 3, 1), ty(DType::f32, {2, 2})});
  c.push_back({OpKind::slice, {f23}, slice_attrs(1, 2, 1, 1), ty(DType::f32, {2, 0})});
  c.push_back(
      {OpKind::slice, {f23}, slice_attrs(1, 0, 4, 1), {}, "expected start and end in [0, 3]"});
  c.push_back({OpKind::slice, {f23}, slice_attrs(1, 0, 3, 0), {}, "expected step >= 1, got 0"});
  auto unfold = [](int64_t dim, int64_t size, int64_t step, int64_t dilation) {
    return Attrs{{AttrKey::dim, dim},
                 {AttrKey::size, size},
                 {AttrKey::step, step},
                 {AttrKey::dilation, dilation}};
  };
  c.push_back({OpKind::unfold, {f23}, unfold(1, 2, 1, 1), ty(DType::f32, {2, 2, 2})});
  c.push_back({OpKind::unfold, {ty(DType::i64, {10})}, unfold(0, 3, 2, 2), ty(DType::i64, {3, 3})});
  c.push_back({OpKind::unfold, {f23}, unfold(-2, 0, 1, 1), ty(DType::f32, {3, 3, 0})});
  c.push_back({OpKind::unfold, {f23}, unfold(1, 4, 1, 1), {}, "expected a window size in [0, 3]"});
  c.push_back({OpKind::unfold, {f23}, unfold(1, 2, 0, 1), {}, "expected step and dilation >= 1"});
  c.push_back({OpKind::unfold, {f23}, unfold(1, 2, 1, 3), {}, "(a span of 4) within dim 1"});
  c.push_back({OpKind::unfold,
               {ty(DType::f32, {})},
               unfold(0, 1, 1, 1),
               {},
               "expected a tensor of rank >= 1"});
  c.push_back({OpKind::pad, {f23}, pad_attrs(1, 1, 2, 1), ty(DType::f32, {2, 8})});
  c.push_back({OpKind::pad, {ty(DType::f32, {0})}, pad_attrs(0, 1, 1, 5), ty(DType::f32, {2})});
  c.push_back(
      {OpKind::pad, {f23}, pad_attrs(0, -1, 0, 0), {}, "expected low, high and interior >= 0"});
  c.push_back({OpKind::detach, {f23}, {}, ty(DType::f32, {2, 3})});
  c.push_back({OpKind::rebind, {f23, f23}, {}, ty(DType::f32, {2, 3})});
  c.push_back({OpKind::rebind, {f23, ty(DType::f64, {2, 3})}, {}, {}, "expected the new value's type f64[2,3]"});
  // Matmul.
  c.push_back({OpKind::matmul,
               {ty(DType::f32, {64, 100}), ty(DType::f32, {100, 10})},
               {},
               ty(DType::f32, {64, 10})});
  c.push_back({OpKind::matmul,
               {ty(DType::f32, {5, 1, 2, 3}), ty(DType::f64, {4, 3, 7})},
               {},
               ty(DType::f64, {5, 4, 2, 7})});
  c.push_back({OpKind::matmul,
               {ty(DType::f32, {64, 100}), ty(DType::f32, {50, 10})},
               {},
               {},
               "matmul: expected a.shape[-1] == b.shape[-2], got [64,100] and [50,10]"});
  c.push_back({OpKind::matmul,
               {ty(DType::f32, {3}), ty(DType::f32, {3, 4})},
               {},
               {},
               "expected operands of rank >= 2"});
  c.push_back({OpKind::matmul,
               {ty(DType::f32, {2, 2, 3}), ty(DType::f32, {3, 3, 4})},
               {},
               {},
               "batch dims of [2,2,3] and [3,3,4] cannot be broadcast"});
  return c;
}

}  // namespace

TEST_CASE("the op table is generated from ops.def") {
  CHECK(static_cast<int>(all_ops().size()) == kNumOps);
  std::set<std::string> names;
  for (OpKind k : all_ops()) {
    const OpInfo& info = op_info(k);
    CHECK(names.insert(info.name).second);
    OpKind back{};
    CHECK(parse_op_name(info.name, &back));
    CHECK(back == k);
    CHECK(std::string(category_name(info.category)) != "?");
    CHECK(is_elementwise(k) ==
          (info.category == OpCategory::Unary || info.category == OpCategory::Binary ||
           info.category == OpCategory::Ternary));
  }
  OpKind k;
  CHECK_FALSE(parse_op_name("conv2d", &k));
  CHECK(std::string(op_name(OpKind::matmul)) == "matmul");
  CHECK(op_info(OpKind::add).arity == 2);
  CHECK(op_info(OpKind::custom).arity == -1);
  CHECK(op_info(OpKind::add).differentiable);
  CHECK_FALSE(op_info(OpKind::eq).differentiable);
  CHECK(is_elementwise(OpKind::where));
  CHECK_FALSE(is_elementwise(OpKind::sum));
  for (OpKind id : {OpKind::arg, OpKind::param, OpKind::custom})
    CHECK(has_identity(id));
  CHECK_FALSE(has_identity(OpKind::constant));
  CHECK_FALSE(has_identity(OpKind::add));
  CHECK_FALSE(has_identity(OpKind::philox));  // pure: draws differ by their counters
}

TEST_CASE("the op table's cost and scalar columns agree with its categories and dtype rules") {
  for (OpKind k : all_ops()) {
    CAPTURE(op_name(k));
    const OpInfo& info = op_info(k);
    // Exactly the elementwise ops say how kernels compute an element, and exactly
    // the reductions how they fold one in: from an identity with a binary op.
    const bool folds = info.scalar == ScalarRule::reduce || info.scalar == ScalarRule::argreduce ||
                       info.scalar == ScalarRule::scan;
    CHECK(is_elementwise(k) == (info.scalar != ScalarRule::none && !folds));
    CHECK(folds == (info.category == OpCategory::Reduce || info.category == OpCategory::Scan));
    CHECK(folds == (info.identity != Identity::none));
    if (folds) {
      // The combine op's own scalar code is what every backend folds with
      // (kernel IR's binary op, the reference's scalar functor).
      const ScalarRule c = op_info(info.combine).scalar;
      CHECK(op_info(info.combine).category == OpCategory::Binary);
      CHECK((c == ScalarRule::math || c == ScalarRule::arith || c == ScalarRule::logical));
    }
    // An argreduce is the position of a maximum or a minimum: the backends'
    // position updates compare with > or < (a NaN wins).
    if (info.scalar == ScalarRule::argreduce)
      CHECK((info.combine == OpKind::maximum || info.combine == OpKind::minimum));
    if (is_expensive(k)) CHECK(is_elementwise(k));
    if (!is_math(k)) continue;
    // Math ops are float-only: integer and bool operands give a floating result.
    // They take one operand or two (elementwise unary or binary, broadcasting).
    CHECK((info.arity == 1 || info.arity == 2));
    CHECK(info.category == (info.arity == 1 ? OpCategory::Unary : OpCategory::Binary));
    // Transcendentals are costly; rounding is one instruction.
    const bool rounding = k == OpKind::floor || k == OpKind::ceil || k == OpKind::round ||
                          k == OpKind::trunc;
    CHECK(is_expensive(k) != rounding);
    for (DType in : {DType::i32, DType::i64, DType::b8, DType::f64})
      CHECK(is_floating(
          infer_type(k, std::vector<TensorType>(size_t(info.arity), ty(in, {3})), {}).dtype));
  }
  CHECK(is_math(OpKind::gelu));
  CHECK(is_math(OpKind::atan2));
  CHECK_FALSE(is_math(OpKind::relu));
  CHECK_FALSE(is_math(OpKind::pow));  // integers keep their own pow
  CHECK(is_expensive(OpKind::div));
  CHECK_FALSE(is_expensive(OpKind::add));
  CHECK(op_info(OpKind::where).scalar == ScalarRule::custom);
  CHECK(op_info(OpKind::eq).scalar == ScalarRule::compare);
}

TEST_CASE("infer_type for every op") {
  std::set<OpKind> covered;
  for (const Case& c : cases()) {
    CAPTURE(op_name(c.op));
    CAPTURE(attrs_str(c.attrs));
    if (c.error) {
      try {
        infer_type(c.op, c.in, c.attrs);
        FAIL("expected an error containing: " << c.error);
      } catch (const Error& e) {
        CHECK_MESSAGE(std::string(e.what()).find(c.error) != std::string::npos, e.what());
        CHECK(std::string(e.what()).starts_with(std::string(op_name(c.op)) + ": "));
      }
    } else {
      CHECK(infer_type(c.op, c.in, c.attrs) == c.want);
    }
    covered.insert(c.op);
  }
  // Every reduction of the table, a new row too: its shape rule over one dim,
  // kept or not (its dtype rule is one of those the cases above check).
  for (OpKind k : all_ops()) {
    if (op_info(k).category != OpCategory::Reduce) continue;
    CAPTURE(op_name(k));
    for (int64_t keep : {0, 1}) {
      const Attrs a = is_arg_reduction(k)
                          ? Attrs{{AttrKey::dim, int64_t{1}}, {AttrKey::keepdim, keep}}
                          : reduce_attrs({1}, keep);
      CHECK(infer_type(k, std::vector<TensorType>{f23}, a).shape ==
            (keep ? Shape{2, 1} : Shape{2}));
    }
    covered.insert(k);
  }
  for (OpKind k : all_ops()) {
    CAPTURE(op_name(k));
    CHECK(covered.count(k));
  }
}

TEST_CASE("infer_type keeps the operands' device") {
  TensorType g = ty(DType::f32, {2, 3}, Device(kCUDA, 1));
  CHECK(infer_type(OpKind::exp, std::vector<TensorType>{g}, {}).device == Device(kCUDA, 1));
  CHECK(infer_type(OpKind::add, std::vector<TensorType>{g, g}, {}) == g);
}
