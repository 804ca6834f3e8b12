// Shared helpers for the graph-pass tests: IR text in, IR text out, and a check
// that a rewritten graph computes what the original did (the interpreter on
// seeded random inputs).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <string_view>

#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "op_table_util.h"
#include "runtime/interpreter.h"

namespace kiln::passtest {

/// Parses (and verifies) IR text.
inline Graph ir(std::string_view text) {
  return parse_graph(text, "test.ir");
}

/// Parses `text`, runs `pass`, verifies the result and returns its canonical text.
template <class Pass>
std::string run_on(Pass pass, std::string_view text) {
  Graph out = pass(ir(text));
  verify(out);
  return print_graph(out);
}

/// A dense host array of type t with seeded random contents: floats in
/// [-2, 2], integers in [-3, 3], bools half true.
inline HostArray random_array(const TensorType& t, std::mt19937_64& rng) {
  TensorType host{t.dtype, t.shape, {}};
  HostArray a = HostArray::make(host);
  visit_dtype(t.dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = a.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>)
        p[i] = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
      else if constexpr (std::is_integral_v<T>)
        p[i] = static_cast<T>(std::uniform_int_distribution<int>(-3, 3)(rng));
      else
        p[i] = static_cast<T>(std::uniform_real_distribution<double>(-2.0, 2.0)(rng));
    }
  });
  return a;
}

inline std::vector<double> values_of(const HostArray& a) {
  std::vector<double> out(static_cast<size_t>(a.type.numel()));
  visit_dtype(a.type.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* p = a.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

/// Random arguments and parameters for g, indexed by their index attributes.
struct Inputs {
  std::vector<HostArray> args, params;
};

inline Inputs random_inputs(const Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Inputs in;
  for (NodeId id : g.args()) {
    size_t index = static_cast<size_t>(g[id].attrs.i(AttrKey::index));
    if (in.args.size() <= index) in.args.resize(index + 1);
    in.args[index] = random_array(g[id].type(), rng);
  }
  for (NodeId id : g.params()) {
    size_t index = static_cast<size_t>(g[id].attrs.i(AttrKey::index));
    if (in.params.size() <= index) in.params.resize(index + 1);
    in.params[index] = random_array(g[id].type(), rng);
  }
  return in;
}

/// Runs `before` and `after` on the same seeded random inputs and checks that
/// their outputs and updated parameters agree (NaN matches NaN, infinities
/// match exactly, other values within a relative 1e-6).
inline void check_same_results(const Graph& before, const Graph& after, uint64_t seed = 1) {
  Inputs a = random_inputs(before, seed);
  Inputs b = a;
  std::vector<HostArray> out_a = interpret(before, a.args, a.params);
  std::vector<HostArray> out_b = interpret(after, b.args, b.params);
  auto compare = [](const HostArray& x, const HostArray& y) {
    REQUIRE(x.type == y.type);
    std::vector<double> vx = values_of(x), vy = values_of(y);
    for (size_t i = 0; i < vx.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(vx[i])) {
        CHECK(std::isnan(vy[i]));
      } else if (std::isinf(vx[i])) {
        CHECK(vy[i] == vx[i]);
      } else {
        CHECK(vy[i] == doctest::Approx(vx[i]).epsilon(1e-6));
      }
    }
  };
  REQUIRE(out_a.size() == out_b.size());
  for (size_t i = 0; i < out_a.size(); ++i) compare(out_a[i], out_b[i]);
  REQUIRE(a.params.size() == b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) compare(a.params[i], b.params[i]);
}

/// A seeded random graph of about `size` nodes over a few compatible f32 shapes:
/// elementwise ops (with broadcasting), arithmetic with the constants 0, 1, 2 and
/// 0.5, reductions, reshapes, transposes, expands, slices, matmuls, random draws
/// and (when `custom`) custom calls, which the interpreter cannot run. Returns
/// the last value and three random others.
inline Graph random_graph(uint64_t seed, size_t size, bool custom = true) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  Graph g;
  Builder b(g);
  auto f32 = [](Shape s) { return TensorType{DType::f32, std::move(s), {}}; };
  std::vector<Value> pool{b.arg(0, f32({4, 6})), b.arg(1, f32({4, 6})), b.arg(2, f32({6})),
                          b.param(0, f32({6, 4})), b.arg(3, f32({4, 1}))};
  const size_t inputs = pool.size();
  // Recent values are picked more often, so chains get deep.
  auto any = [&]() {
    size_t back =
        std::min(pool.size() - 1, static_cast<size_t>(std::geometric_distribution<int>(0.3)(rng)));
    return pool[pool.size() - 1 - back];
  };
  static const std::vector<OpKind> unary = test::random_graph_ops(1),
                                   binary = test::random_graph_ops(2);
  const OpKind with_constant[] = {OpKind::add, OpKind::sub, OpKind::mul, OpKind::div, OpKind::pow};
  const double constants[] = {0.0, 1.0, 2.0, 0.5};
  int custom_fn = 0;
  while (g.size() < size) {
    Value x = any();
    const Shape s = g.type(x).shape;
    Value r;
    try {
      switch (pick(13)) {
        case 0:
        case 1:
          r = b.unary(unary[pick(unary.size())], x);
          break;
        case 2:
        case 3: {
          Value y;
          for (int tries = 0; tries < 8 && !y; ++tries) {
            Value c = pool[pick(pool.size())];
            if (broadcastable(g.type(c).shape, s) || broadcastable(s, g.type(c).shape)) y = c;
          }
          if (y) r = b.binary(binary[pick(binary.size())], x, y);
          break;
        }
        case 4: {
          Value c = b.scalar_like(x, constants[pick(4)]);
          r = pick(2) ? b.binary(with_constant[pick(5)], x, c)
                      : b.binary(with_constant[pick(5)], c, x);
          break;
        }
        case 5:
          if (!s.empty()) {
            std::vector<int64_t> dims{static_cast<int64_t>(pick(s.size()))};
            bool keep = pick(2) == 0;
            r = pick(2) ? b.sum(x, dims, keep)
                        : b.op(OpKind::max, {x},
                               Attrs{{AttrKey::dims, dims}, {AttrKey::keepdim, int64_t{keep}}});
          }
          break;
        case 6:
          if (numel(s) == 24)
            r = b.reshape(x, pick(2) ? Shape{24} : Shape{4, 6});
          else if (s.size() == 1)
            r = b.reshape(x, {1, s[0]});
          break;
        case 7:
          if (s.size() == 2) r = b.transpose_last(x);
          break;
        case 8:
          if (s == Shape{6} || s == Shape{1, 6} || s == Shape{4, 1}) r = b.expand(x, {4, 6});
          break;
        case 9:
          if (!s.empty() && s[0] >= 2)
            r = b.op(OpKind::slice, {x},
                     Attrs{{AttrKey::dim, int64_t{0}},
                           {AttrKey::start, int64_t{1}},
                           {AttrKey::end, s[0]},
                           {AttrKey::step, int64_t{1}}});
          break;
        case 10:
          if (s.size() == 2) {
            Value y;
            for (Value c : pool)
              if (g.type(c).rank() == 2 && g.type(c).shape[0] == s[1]) y = c;
            if (!y) y = b.transpose_last(x);
            r = b.matmul(x, y);
          }
          break;
        case 11:
          if (custom && pick(2))
            r = Value(b.op_multi(OpKind::custom, {x}, Attrs{{AttrKey::fn, int64_t{custom_fn++}}},
                                 {g.type(x), g.type(x)}),
                      static_cast<uint32_t>(pick(2)));
          else
            r = b.binary(OpKind::philox, b.constant(double(pick(100)), DType::i64), x);  // a draw
          break;
        case 12:
          r = pick(2)
                  ? b.constant(constants[pick(4)], DType::f32, s)
                  : b.op_typed(
                        OpKind::literal, {},
                        Attrs{{AttrKey::data, std::vector<double>{1.0, -2.0, 3.0, 0.5, 0.0, 4.0}}},
                        f32({6}));
          break;
      }
    } catch (const Error&) {
      r = Value();
    }
    if (r) pool.push_back(r);
  }
  g.outputs.push_back(pool.back());
  for (int i = 0; i < 3; ++i) g.outputs.push_back(pool[inputs + pick(pool.size() - inputs)]);
  return g;
}

}  // namespace kiln::passtest
