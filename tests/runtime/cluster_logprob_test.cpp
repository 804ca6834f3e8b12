// The cluster log-probability library step (runtime/cluster_logprob.h) against
// its oracle, the reference kernels (every row in double): the output and every
// mask of gradients, f32 and f64, cluster sizes that are not multiples of the
// lanes or of dw's column blocks, no member rows, every row a member, targets
// below, inside and above the cluster; the same bits at every thread count; a
// NaN or inf in a row outside the cluster reaches no other row and no gradient.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "runtime/cluster_logprob.h"
#include "runtime/thread_pool.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Targets: a share `inside` of them in [start, start + columns), the rest
// below or above it (negative ones too).
Arr targets(int64_t rows, int64_t start, int64_t columns, double inside, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> t(static_cast<size_t>(rows));
  for (double& x : t) {
    const double v = u(rng);
    if (v < inside)
      x = double(start + int64_t(u(rng) * double(columns)) % std::max<int64_t>(columns, 1));
    else
      x = v < (1 + inside) / 2 ? double(start - 1 - int64_t(u(rng) * 5))
                               : double(start + columns + int64_t(u(rng) * 5));
  }
  return arr(DType::i64, {rows}, t);
}

struct Run {
  Arr out, grad;
};

// The library step's output and its gradients (mask 3) on the operands.
Run library(const ClusterShape& s, const Arr& h, const Arr& w, const Arr& t, const Arr& g) {
  Run r{empty(s.dtype, {s.rows}), empty(s.dtype, {s.rows * s.width + s.columns * s.width})};
  std::memset(r.out.v.data, 0x7f, size_t(r.out.type().bytes()));
  std::memset(r.grad.v.data, 0x7f, size_t(r.grad.type().bytes()));
  cluster_logprob_forward(s, h.v.data, w.v.data, t.v.ptr<int64_t>(), r.out.v.data);
  cluster_logprob_backward(s, 3, h.v.data, w.v.data, t.v.ptr<int64_t>(), g.v.data, r.grad.v.data);
  return r;
}

bool same_bits(const Arr& a, const Arr& b) {
  return a.type() == b.type() && std::memcmp(a.v.data, b.v.data, size_t(a.type().bytes())) == 0;
}

}  // namespace

TEST_CASE(
    "the cluster log-probability step equals the reference kernels, forward and every gradient") {
  std::mt19937 rng(11);
  struct Size {
    int64_t rows, width, columns, start;
    double inside;
  };
  const Size sizes[] = {{1, 1, 1, 0, 1.0},      {7, 3, 5, 2, 0.5},    {40, 16, 150, 256, 0.3},
                        {33, 4, 64, 1024, 1.0}, {20, 5, 129, 7, 0.0}, {64, 17, 300, -3, 0.6},
                        {0, 4, 9, 0, 0.5},      {9, 0, 6, 1, 0.7},    {5, 2, 0, 4, 0.5}};
  for (DType dt : {DType::f32, DType::f64})
    for (const Size& z : sizes) {
      CAPTURE(dtype_name(dt));
      CAPTURE(z.rows);
      CAPTURE(z.width);
      CAPTURE(z.columns);
      const Arr h = randoms(dt, {z.rows, z.width}, rng), w = randoms(dt, {z.columns, z.width}, rng),
                g = randoms(dt, {z.rows}, rng);
      const Arr t = targets(z.rows, z.start, z.columns, z.inside, rng);
      const Attrs attrs{{AttrKey::start, z.start}};
      const ClusterShape s = cluster_logprob_shape(h.type(), w.type(), attrs);
      const double tol = dt == DType::f32 ? 2e-5 : 1e-12;
      Arr want = empty(dt, {z.rows});
      const std::vector<View> fwd{h.v, w.v, t.v};
      reference_kernel(OpKind::cluster_logprob, attrs, fwd, want.v);
      const Run got = library(s, h, w, t, g);
      const std::vector<double> a = values(want.v), b = values(got.out.v), tv = values(t.v);
      for (size_t i = 0; i < a.size(); ++i) {
        REQUIRE(std::abs(b[i] - a[i]) <= tol * (1 + std::abs(a[i])));
        const bool member = tv[i] >= double(z.start) && tv[i] < double(z.start + z.columns);
        if (!member) REQUIRE(b[i] == 0.0);
        if (member) REQUIRE(a[i] <= 0.0);
      }
      // Every mask (1 h, 2 w), laid end to end in that order.
      for (int64_t which : {1, 2, 3}) {
        CAPTURE(which);
        Attrs ga = attrs;
        ga.set(AttrKey::which, which);
        const int64_t n =
            ((which & 1) ? z.rows * z.width : 0) + ((which & 2) ? z.columns * z.width : 0);
        Arr ref = empty(dt, {n}), lib = empty(dt, {n});
        const std::vector<View> bwd{h.v, w.v, t.v, g.v};
        reference_kernel(OpKind::cluster_logprob_grad, ga, bwd, ref.v);
        std::memset(lib.v.data, 0x7f, size_t(lib.type().bytes()));
        cluster_logprob_backward(s, int(which), h.v.data, w.v.data, t.v.ptr<int64_t>(), g.v.data,
                                 lib.v.data);
        const std::vector<double> r = values(ref.v), l = values(lib.v);
        for (size_t i = 0; i < r.size(); ++i)
          REQUIRE(std::abs(l[i] - r[i]) <= 5 * tol * (1 + std::abs(r[i])));
        if (which == 3) {
          const std::vector<double> all = values(got.grad.v);
          for (size_t i = 0; i < l.size(); ++i) REQUIRE(all[i] == l[i]);
        }
      }
    }
}

TEST_CASE("the cluster log-probability step gives the same bits at every thread count") {
  std::mt19937 rng(3);
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    const int64_t rows = 300, width = 16, columns = 777, start = 100;
    const Arr h = randoms(dt, {rows, width}, rng), w = randoms(dt, {columns, width}, rng),
              g = randoms(dt, {rows}, rng), t = targets(rows, start, columns, 0.4, rng);
    const ClusterShape s =
        cluster_logprob_shape(h.type(), w.type(), Attrs{{AttrKey::start, start}});
    const int saved = num_threads();
    set_num_threads(1);
    const Run one = library(s, h, w, t, g);
    for (int n : {2, 3, 8}) {
      CAPTURE(n);
      set_num_threads(n);
      const Run more = library(s, h, w, t, g);
      CHECK(same_bits(one.out, more.out));
      CHECK(same_bits(one.grad, more.grad));
    }
    set_num_threads(saved);
  }
}

TEST_CASE("a NaN or inf in a row outside the cluster changes no other row and no gradient") {
  std::mt19937 rng(5);
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    const int64_t rows = 12, width = 3, columns = 40, start = 10;
    Arr h = randoms(dt, {rows, width}, rng);
    const Arr w = randoms(dt, {columns, width}, rng), g = randoms(dt, {rows}, rng);
    std::vector<double> tv(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) tv[size_t(r)] = double(r % 3 == 0 ? 5 : start + r);
    const Arr t = arr(DType::i64, {rows}, tv);  // rows 0, 3, 6, 9 are outside
    const ClusterShape s =
        cluster_logprob_shape(h.type(), w.type(), Attrs{{AttrKey::start, start}});
    const Run clean = library(s, h, w, t, g);
    const double nan = std::numeric_limits<double>::quiet_NaN(),
                 inf = std::numeric_limits<double>::infinity();
    std::vector<double> hv = values(h.v);
    hv[0] = nan;
    hv[3 * width + 1] = inf;
    hv[6 * width + 2] = -inf;
    const Arr dirty = arr(dt, {rows, width}, hv);
    std::vector<double> gv = values(g.v);
    gv[9] = nan;  // an outside row's output gradient is not read either
    const Arr dirty_g = arr(dt, {rows}, gv);
    const Run got = library(s, dirty, w, t, dirty_g);
    CHECK(same_bits(clean.out, got.out));
    CHECK(same_bits(clean.grad, got.grad));
    for (double x : values(got.grad.v)) CHECK(std::isfinite(x));
    // The reference kernels agree.
    Arr want = empty(dt, {rows});
    const std::vector<View> fwd{dirty.v, w.v, t.v};
    reference_kernel(OpKind::cluster_logprob, Attrs{{AttrKey::start, start}}, fwd, want.v);
    for (double x : values(want.v)) CHECK(std::isfinite(x));
  }
}
