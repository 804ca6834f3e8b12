// The attention library step (runtime/attention.h) against its oracle, the
// reference kernels (one query row at a time with its whole row of scores, in
// double): the output and every mask of gradients, f32 and f64, causal or not,
// query and key lengths that are not multiples of the blocks, L != S, E != Ev,
// batches (one head, split into chunks of key blocks; many heads).
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "runtime/attention.h"
#include "runtime/thread_pool.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("the streaming attention step equals the reference kernels, forward and every gradient") {
  std::mt19937 rng(7);
  struct Size {
    int64_t batch, L, S, E, Ev;
  };
  const Size sizes[] = {{1, 5, 7, 3, 2},    {2, 70, 130, 8, 5},  {3, 200, 200, 16, 16},
                        {1, 129, 64, 4, 6}, {1, 300, 700, 8, 3}, {20, 130, 260, 4, 4},
                        // more queries than keys, causal rows past the last key (found by kiln-fuzz)
                        {1, 2, 1, 1, 1},    {2, 40, 3, 2, 3},    {1, 150, 133, 5, 2}};
  for (DType dt : {DType::f32, DType::f64})
    for (const Size& z : sizes)
      for (bool causal : {false, true}) {
        CAPTURE(dtype_name(dt));
        CAPTURE(z.L);
        CAPTURE(z.S);
        CAPTURE(causal);
        const Arr q = randoms(dt, {z.batch, z.L, z.E}, rng),
                  k = randoms(dt, {z.batch, z.S, z.E}, rng),
                  v = randoms(dt, {z.batch, z.S, z.Ev}, rng),
                  g = randoms(dt, {z.batch, z.L, z.Ev}, rng);
        const Attrs attrs{{AttrKey::scale, 0.4}, {AttrKey::causal, int64_t(causal)}};
        const AttentionShape s = attention_shape(q.type(), k.type(), v.type(), attrs);
        const double tol = dt == DType::f32 ? 2e-5 : 1e-12;
        Arr want = empty(dt, {z.batch, z.L, z.Ev}), got = empty(dt, want.v.shape);
        const std::vector<View> fwd{q.v, k.v, v.v};
        reference_kernel(OpKind::attention, attrs, fwd, want.v);
        attention_forward(s, q.v.data, k.v.data, v.v.data, got.v.data);
        const std::vector<double> w = values(want.v), o = values(got.v);
        for (size_t i = 0; i < w.size(); ++i)
          REQUIRE(std::abs(o[i] - w[i]) <= tol * (1 + std::abs(w[i])));
        // Every mask of gradients (1 q, 2 k, 4 v), laid end to end in that order.
        const View* operand[3] = {&q.v, &k.v, &v.v};
        std::vector<double> alone[3];  // each gradient asked for on its own
        for (int which = 1; which < 8; ++which) {
          CAPTURE(which);
          int64_t n = 0;
          for (int i = 0; i < 3; ++i)
            if (which & (1 << i)) n += operand[i]->numel();
          Arr gw = empty(dt, {n}), gg = empty(dt, {n});
          Attrs ga = attrs;
          ga.set(AttrKey::which, int64_t(which));
          const std::vector<View> bwd{q.v, k.v, v.v, want.v, g.v};
          reference_kernel(OpKind::attention_grad, ga, bwd, gw.v);
          attention_backward(s, which, q.v.data, k.v.data, v.v.data, want.v.data, g.v.data,
                             gg.v.data);
          const std::vector<double> a = values(gw.v), b = values(gg.v);
          for (size_t i = 0; i < a.size(); ++i)
            REQUIRE(std::abs(b[i] - a[i]) <= 5 * tol * (1 + std::abs(a[i])));
          if (which == 1 || which == 2 || which == 4) alone[which / 2] = b;
          if (which != 7) continue;
          // Asked for together, each gradient has the bits it has alone.
          CHECK(std::vector<double>(b.begin(), b.begin() + q.v.numel()) == alone[0]);
          CHECK(std::vector<double>(b.begin() + q.v.numel(), b.end() - v.v.numel()) == alone[1]);
          CHECK(std::vector<double>(b.end() - v.v.numel(), b.end()) == alone[2]);
        }
      }
}

TEST_CASE("the attention step gives the same bits at every thread count") {
  std::mt19937 rng(8);
  const int64_t batch = 3, L = 300, S = 700, E = 16, Ev = 8;  // several chunks of key blocks
  const Arr q = randoms(DType::f32, {batch, L, E}, rng),
            k = randoms(DType::f32, {batch, S, E}, rng),
            v = randoms(DType::f32, {batch, S, Ev}, rng),
            g = randoms(DType::f32, {batch, L, Ev}, rng);
  const Attrs attrs{{AttrKey::scale, 0.3}, {AttrKey::causal, int64_t{1}}};
  const AttentionShape s = attention_shape(q.type(), k.type(), v.type(), attrs);
  const int64_t n = batch * (L * E + S * E + S * Ev);
  auto run = [&](int threads) {
    const int saved = num_threads();
    set_num_threads(threads);
    Arr out = empty(DType::f32, {batch, L, Ev}), grad = empty(DType::f32, {n});
    attention_forward(s, q.v.data, k.v.data, v.v.data, out.v.data);
    attention_backward(s, 7, q.v.data, k.v.data, v.v.data, out.v.data, g.v.data, grad.v.data);
    set_num_threads(saved);
    std::vector<double> r = values(out.v), d = values(grad.v);
    r.insert(r.end(), d.begin(), d.end());
    return r;
  };
  const std::vector<double> one = run(1);
  CHECK(run(2) == one);
  CHECK(run(3) == one);
  CHECK(run(7) == one);
}
