// Shared fixtures for the ir/ tests: a graph that uses every op in the table.
#pragma once

#include <limits>
#include <set>

#include "ir/builder.h"

namespace kiln::test {

inline TensorType ty(DType t, Shape s, Device d = {}) {
  return TensorType{t, std::move(s), d};
}

/// A graph with at least one node of every op in ops.def, several dtypes, a CUDA
/// value, every attribute kind (with awkward floats and strings), a multi-result
/// node, locations, several outputs and a parameter update.
inline Graph every_op_graph() {
  Graph g;
  Builder b(g);
  b.loc = SourceLoc("/home/user/src/model.cpp", 10);
  Value x = b.arg(0, ty(DType::f32, {2, 3}));
  Value w = b.param(0, ty(DType::f32, {3, 4}), "w1 \"quoted\"\n\ttab\\");
  Value y = b.param(1, ty(DType::f32, {2, 3}));
  Value gpu = b.arg(1, ty(DType::f32, {3}, Device(kCUDA)));
  Value gpu1 = b.arg(2, ty(DType::f64, {3}, Device(kCUDA, 1)));
  Value ints = b.arg(3, ty(DType::i32, {2, 3}));
  b.loc = SourceLoc("other.cpp", 20);
  Value two = b.constant(2.0, DType::f32);
  (void)b.constant(-0.0, DType::f64, {2});
  (void)b.constant(std::numeric_limits<double>::infinity(), DType::f32, {3});
  (void)b.constant(1e-5, DType::f64);
  (void)b.op_typed(
      OpKind::literal, {},
      Attrs{{AttrKey::data,
             std::vector<double>{1.5, -0.0, 1e300, 0.1, std::numeric_limits<double>::quiet_NaN(),
                                 -std::numeric_limits<double>::infinity()}}},
      ty(DType::f64, {2, 3}));
  (void)b.op_typed(OpKind::literal, {}, Attrs{{AttrKey::data, std::vector<int64_t>{1, -2, 3}}},
                   ty(DType::i64, {3}));
  (void)b.op_typed(OpKind::arange, {}, Attrs{{AttrKey::start, 0.5}, {AttrKey::step, int64_t{2}}},
                   ty(DType::f32, {5}));
  Value r = b.arg(4, ty(DType::f32, {2, 3}));  // every binary op's second operand
  b.loc = SourceLoc();
  for (OpKind k : all_ops()) {
    OpCategory c = op_info(k).category;
    if (c == OpCategory::Unary && k != OpKind::cast) (void)b.unary(k, x);
    if (c == OpCategory::Binary) (void)b.binary(k, x, r);
  }
  (void)b.unary(OpKind::neg, ints);
  (void)b.unary(OpKind::exp, ints);
  (void)b.unary(OpKind::neg, gpu);
  (void)b.unary(OpKind::tanh, gpu1);
  Value xd = b.cast(x, DType::f64);
  Value cond = b.binary(OpKind::lt, x, two);
  Value sel = b.where(cond, x, two);
  Value s = b.sum(sel, {1}, true);
  (void)b.sum(ints, {0, 1}, false);
  (void)b.op(OpKind::check_index, {ints},
             Attrs{{AttrKey::high, int64_t{8}}, {AttrKey::name, std::string("gather")}});
  (void)b.op(OpKind::check_nonzero, {ints}, Attrs{{AttrKey::name, std::string("fmod")}});
  (void)b.op(OpKind::check_distribution, {x},
             Attrs{{AttrKey::count, int64_t{2}}, {AttrKey::name, std::string("multinomial")}});
  for (OpKind k : all_ops())
    if (is_scan(k))
      (void)b.op(
          k, {x},
          Attrs{{AttrKey::dim, int64_t{1}}, {AttrKey::reverse, int64_t{k == OpKind::cumprod}}});
  (void)b.op(OpKind::argsort, {x},
             Attrs{{AttrKey::dim, int64_t{1}}, {AttrKey::descending, int64_t{1}}, {AttrKey::count, int64_t{2}}});
  {
    const Value q = b.op(OpKind::reshape, {x}, Attrs{{AttrKey::shape, b.type(x).shape}});
    const Attrs att{
        {AttrKey::scale, 0.5}, {AttrKey::causal, int64_t{0}}, {AttrKey::which, int64_t{5}}};
    const Value o = b.op(OpKind::attention, {q, q, q}, att);
    (void)b.op(OpKind::attention_grad, {q, q, q, o, o}, att);
  }
  {
    const Value t =
        b.op_typed(OpKind::literal, {}, Attrs{{AttrKey::data, std::vector<int64_t>{2, 0}}},
                   ty(DType::i64, {2}));
    const Value lp = b.op(OpKind::cluster_logprob, {x, y, t}, Attrs{{AttrKey::start, int64_t{1}}});
    (void)b.op(OpKind::cluster_logprob_grad, {x, y, t, lp},
               Attrs{{AttrKey::start, int64_t{1}}, {AttrKey::which, int64_t{3}}});
  }
  Value picked = b.op(OpKind::gather, {x, ints}, Attrs{{AttrKey::dim, int64_t{0}}});
  (void)b.op(OpKind::scatter_add, {x, ints, picked}, Attrs{{AttrKey::dim, int64_t{-1}}});
  for (OpKind k : all_ops())
    if (op_info(k).category == OpCategory::Collective)
      (void)b.op(k, {x},
                 Attrs{{AttrKey::reduce, std::string("avg")},
                       {AttrKey::root, int64_t{0}},
                       {AttrKey::world, int64_t{1}},
                       {AttrKey::bucket, int64_t{0}}});
  (void)b.op(OpKind::max, {x},
             Attrs{{AttrKey::dims, std::vector<int64_t>{0}}, {AttrKey::keepdim, int64_t{0}}});
  (void)b.op(OpKind::min, {xd},
             Attrs{{AttrKey::dims, std::vector<int64_t>{0, 1}}, {AttrKey::keepdim, int64_t{1}}});
  (void)b.op(OpKind::argmax, {x},
             Attrs{{AttrKey::dim, int64_t{1}}, {AttrKey::keepdim, int64_t{0}}});
  (void)b.op(OpKind::argmin, {x},
             Attrs{{AttrKey::dim, int64_t{-1}}, {AttrKey::keepdim, int64_t{1}}});
  for (OpKind k : all_ops())  // and every other reduction of the table
    if (op_info(k).category == OpCategory::Reduce)
      (void)b.op(
          k, {x},
          is_arg_reduction(k)
              ? Attrs{{AttrKey::dim, int64_t{0}}, {AttrKey::keepdim, int64_t{0}}}
              : Attrs{{AttrKey::dims, std::vector<int64_t>{1}}, {AttrKey::keepdim, int64_t{0}}});
  Value flat = b.reshape(x, {6});
  Value big = b.expand(s, {4, 2, 3});
  Value t = b.transpose_last(x);
  (void)b.op(OpKind::slice, {flat},
             Attrs{{AttrKey::dim, int64_t{0}},
                   {AttrKey::start, int64_t{1}},
                   {AttrKey::end, int64_t{6}},
                   {AttrKey::step, int64_t{2}}});
  (void)b.op(OpKind::unfold, {t},
             Attrs{{AttrKey::dim, int64_t{0}},
                   {AttrKey::size, int64_t{2}},
                   {AttrKey::step, int64_t{1}},
                   {AttrKey::dilation, int64_t{1}}});
  (void)b.op(OpKind::pad, {t},
             Attrs{{AttrKey::dim, int64_t{1}},
                   {AttrKey::low, int64_t{1}},
                   {AttrKey::high, int64_t{2}},
                   {AttrKey::interior, int64_t{1}}});
  (void)b.op(OpKind::detach, {t}, {});
  (void)b.op(OpKind::rebind, {t, b.neg(t)}, {});
  b.loc = SourceLoc("model.cpp", 30);
  Value mm = b.matmul(x, w);
  NodeId call = b.op_multi(OpKind::custom, {x, gpu}, Attrs{{AttrKey::fn, int64_t{3}}},
                           {ty(DType::f32, {3}), ty(DType::i64, {2, 3}, Device(kCUDA))});
  Value step = b.sub(w, b.mul(b.scalar_like(w, 0.01), b.ones_like(w)));
  g.outputs = {mm, big, Value(call, 1), Value(call, 0), mm};
  g.updates = {{0, step}, {1, b.add(y, b.zeros_like(y))}};
  return g;
}

/// The op kinds a graph uses.
inline std::set<OpKind> ops_used(const Graph& g) {
  std::set<OpKind> used;
  for (const Node& n : g.nodes()) used.insert(n.op);
  return used;
}

}  // namespace kiln::test
