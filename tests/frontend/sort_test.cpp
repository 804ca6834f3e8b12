// sort, argsort, topk, randperm and prod (frontend/sort_ops.cpp, math_ops.cpp):
// against std::stable_sort and a plain loop, eagerly (the host sort) and traced
// (comparison counting inside the plan), with ties, NaN and infinities.
#include "test_util.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

using namespace kiln;

namespace {

// The order PyTorch gives (stable, NaN largest) of one row, by std::stable_sort.
std::vector<int64_t> reference_order(const std::vector<double>& row, bool descending) {
  std::vector<int64_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const double x = row[size_t(a)], y = row[size_t(b)];
    if (std::isnan(x) || std::isnan(y))
      return descending ? std::isnan(x) && !std::isnan(y) : !std::isnan(x) && std::isnan(y);
    return descending ? x > y : x < y;
  });
  return order;
}

bool same_value(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

// [rows, n] f32 values drawn from a few numbers (many ties), NaN and +-inf.
Tensor tied_data(int64_t rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const double pool[] = {-2, -0.5, 0, 0.5, 1, 3, NAN, INFINITY, -INFINITY};
  std::vector<double> v(size_t(rows * n));
  for (double& x : v) x = rng() % 4 == 0 ? pool[rng() % 9] : double(rng() % 1000) / 100 - 5;
  return from_vector(v, {rows, n}, kFloat32);
}

// Checks values [rows, k] and indices [rows, k] of x [rows, n] (sorted along dim 1)
// against the reference order's first k.
void check_rows(const Tensor& x, const Tensor& values, const Tensor& indices, int64_t k,
                bool descending) {
  const int64_t rows = x.size(0), n = x.size(1);
  REQUIRE(indices.dtype() == kInt64);
  REQUIRE(values.dtype() == x.dtype());
  REQUIRE(values.sizes() == Shape{rows, k});
  REQUIRE(indices.sizes() == Shape{rows, k});
  const auto xv = x.to_vector<double>(), vv = values.to_vector<double>();
  const auto iv = indices.to_vector<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<double> row(xv.begin() + r * n, xv.begin() + (r + 1) * n);
    const std::vector<int64_t> want = reference_order(row, descending);
    for (int64_t j = 0; j < k; ++j) {
      CHECK_MESSAGE(iv[size_t(r * k + j)] == want[size_t(j)], "row ", r, " position ", j);
      CHECK_MESSAGE(same_value(vv[size_t(r * k + j)], row[size_t(want[size_t(j)])]), "row ", r,
                    " position ", j);
    }
  }
}

bool is_permutation_of_n(const Tensor& p, int64_t n) {
  std::vector<int64_t> v = p.to_vector<int64_t>();
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < int64_t(v.size()); ++i)
    if (v[size_t(i)] != i) return false;
  return int64_t(v.size()) == n;
}

}  // namespace

TEST_CASE("sort and topk follow std::stable_sort with ties, NaN and infinities, eager and traced") {
  const Tensor x = tied_data(5, 37, 1);
  for (bool traced : {false, true}) {
    for (bool descending : {false, true}) {
      CAPTURE(traced);
      CAPTURE(descending);
      auto sorted = jit([descending](Tensor t) { return t.sort(1, descending); });
      auto [v, i] = traced ? sorted(x) : x.sort(1, descending);
      check_rows(x, v, i, 37, descending);
      // Along dim 0: the same through a transpose.
      auto [v0, i0] = traced ? jit([descending](Tensor t) { return sort(t, 0, descending); })(x.t())
                             : sort(x.t(), 0, descending);
      check_rows(x, v0.t(), i0.t(), 37, descending);
      Tensor a = traced ? jit([descending](Tensor t) { return t.argsort(-1, descending); })(x)
                        : argsort(x, -1, descending);
      CHECK(equal(a, i));
      // topk: largest = descending order, smallest = ascending.
      auto [tv, ti] = traced ? jit([descending](Tensor t) { return t.topk(6, 1, descending); })(x)
                             : topk(x, 6, 1, descending);
      check_rows(x, tv, ti, 6, descending);
    }
  }
}

TEST_CASE("sort keeps integers exact and handles bools, empty rows and 0-d tensors") {
  const int64_t big = int64_t(1) << 60;
  Tensor ints = empty({5}, kInt64);  // written in place: tensor({...}) goes through double
  const int64_t values[] = {big + 3, big + 1, -big, big + 1, 7};
  std::copy(std::begin(values), std::end(values), ints.data_ptr<int64_t>());
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    auto run = [&](const std::function<std::tuple<Tensor, Tensor>(Tensor)>& f, const Tensor& t) {
      return traced ? jit([f](Tensor u) { return f(u); })(t) : f(t);
    };
    auto [v, i] = run([](Tensor t) { return t.sort(); }, ints);
    CHECK(v.to_vector<int64_t>() == std::vector<int64_t>{-big, 7, big + 1, big + 1, big + 3});
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{2, 4, 1, 3, 0});
    auto [bv, bi] =
        run([](Tensor t) { return t.sort(0, true); }, tensor({false, true, false, true}));
    CHECK(bv.dtype() == kBool);
    CHECK(bv.to_vector<bool>() == std::vector<bool>{true, true, false, false});
    CHECK(bi.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 2});
    auto [ev, ei] = run([](Tensor t) { return t.sort(1); }, zeros({3, 0}));
    CHECK(ev.sizes() == Shape{3, 0});
    CHECK(ei.sizes() == Shape{3, 0});
    auto [sv, si] = run([](Tensor t) { return t.topk(1); }, scalar_tensor(2.5));
    CHECK(sv.sizes() == Shape{});
    CHECK(sv.item<float>() == 2.5f);
    CHECK(si.item<int64_t>() == 0);
  }
}

TEST_CASE("sorted values carry the gradient to the elements they came from") {
  const Tensor w = tensor({1.0, 10.0, 100.0});
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    Tensor x = tensor({3.0, 1.0, 2.0}).requires_grad_();
    auto loss = [&](Tensor t) { return (std::get<0>(t.sort()) * w).sum(); };
    if (traced) {
      jit([&](Tensor t) {
        Tensor l = loss(t);
        l.backward();
        return l;
      })(x);
    } else {
      loss(x).backward();
    }
    CHECK(x.grad().to_vector<double>() == std::vector<double>{100, 1, 10});
    Tensor y = tensor({{4.0, -1.0, 0.0, 2.0}}).requires_grad_();
    auto [v, i] = y.topk(2, 1, false);  // -1 (position 1), then 0 (position 2)
    (v * tensor({{5.0, 7.0}})).sum().backward();
    CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 5, 7, 0});
    CHECK_FALSE(i.requires_grad());
  }
}

TEST_CASE("randperm is a permutation, follows manual_seed, and a plan draws a fresh one per call") {
  for (int64_t n : {0, 1, 2, 100, 50000}) {
    CAPTURE(n);
    Tensor p = randperm(n);
    CHECK(p.dtype() == kInt64);
    CHECK(p.sizes() == Shape{n});
    CHECK(is_permutation_of_n(p, n));
  }
  CHECK(randperm(5, kFloat32).dtype() == kFloat32);
  manual_seed(11);
  const Tensor a = randperm(300);
  manual_seed(11);
  CHECK(equal(randperm(300), a));
  CHECK_FALSE(equal(randperm(300), a));

  auto f = jit([](Tensor x) { return randperm(300) + x; });
  const Tensor zero = zeros({300}, kInt64);
  manual_seed(11);
  const Tensor first = f(zero);
  CHECK(equal(first, a));  // the same stream as eagerly
  const Tensor second = f(zero);
  CHECK(is_permutation_of_n(second, 300));
  CHECK_FALSE(equal(first, second));
  CHECK(f.stats().misses == 1);
}

TEST_CASE("prod equals a loop product, over a dim and all dims, with exact zeros") {
  std::mt19937 rng(3);
  const Shape shape{3, 5, 6};
  std::vector<double> v(90);
  for (double& x : v) x = rng() % 7 == 0 ? 0.0 : double(int(rng() % 200) - 100) / 64;
  const Tensor x = from_vector(v, shape, kFloat64);
  auto at = [&](int64_t i, int64_t j, int64_t k) { return v[size_t((i * 5 + j) * 6 + k)]; };
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    auto run = [&](const std::function<Tensor(Tensor)>& f, const Tensor& t) {
      return traced ? jit([f](Tensor u) { return f(u); })(t) : f(t);
    };
    const auto p1 = run([](Tensor t) { return t.prod(1); }, x).to_vector<double>();
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t k = 0; k < 6; ++k) {
        double want = 1;
        for (int64_t j = 0; j < 5; ++j) want *= at(i, j, k);
        CHECK(p1[size_t(i * 6 + k)] == doctest::Approx(want).epsilon(1e-14));
      }
    double all = 1;
    for (double e : v) all *= e;
    CHECK(run([](Tensor t) { return prod(t); }, x).item<double>() == all);
    CHECK(run([](Tensor t) { return t.prod(-1, true); }, x).sizes() == Shape{3, 5, 1});
    CHECK(run([](Tensor t) { return prod(t, 0); }, zeros({0, 4})).to_vector<double>() ==
          std::vector<double>{1, 1, 1, 1});
    // Integers and bools multiply in int64, exactly: 20! fits.
    Tensor ints = arange(1, 21, 1, TensorOptions(kInt32));
    Tensor p = run([](Tensor t) { return t.prod(); }, ints);
    CHECK(p.dtype() == kInt64);
    CHECK(p.item<int64_t>() == 2432902008176640000);
    CHECK(run([](Tensor t) { return t.prod(1); }, tensor({true, false, true, true}).reshape({2, 2}))
              .to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  }
  // f32: traced multiplies in the same order as eager, so the results are the same bits.
  const Tensor xf = x.to(kFloat32).add(0.5);
  CHECK(equal(jit([](Tensor t) { return t.prod(2); })(xf), xf.prod(2)));
}

TEST_CASE("prod's gradient is right at zeros") {
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    auto grad_of = [&](std::vector<double> values) {
      Tensor x = from_vector(values, {int64_t(values.size())}, kFloat64).requires_grad_();
      if (traced)
        jit([](Tensor t) {
          Tensor p = t.prod();
          p.backward();
          return p;
        })(x);
      else
        x.prod().backward();
      return x.grad().to_vector<double>();
    };
    CHECK(grad_of({2, 0, 3}) == std::vector<double>{0, 6, 0});
    CHECK(grad_of({2, 0, 3, 0, 5}) == std::vector<double>{0, 0, 0, 0, 0});
    CHECK(grad_of({2, -1.5, 4}) == std::vector<double>{-6, 8, -3});
  }
}

TEST_CASE("bad arguments to sort, topk, prod and randperm give clear errors") {
  const Tensor x = ones({2, 4});
  KILN_CHECK_ERROR(x.topk(5), "topk: expected k in [0, 4]", "got 5", "sort_test.cpp:");
  KILN_CHECK_ERROR(x.topk(-1, 0), "topk: expected k in [0, 2]", "got -1");
  KILN_CHECK_ERROR(x.sort(2), "sort:", "dim 2 is out of range");
  KILN_CHECK_ERROR(argsort(x, -3), "argsort:", "out of range");
  KILN_CHECK_ERROR(x.prod(3), "prod:", "out of range");
  KILN_CHECK_ERROR(randperm(-1), "randperm: expected n >= 0, got -1");
  KILN_CHECK_ERROR(x.kthvalue(0), "kthvalue: expected k in [1, 4]", "got 0", "sort_test.cpp:");
  KILN_CHECK_ERROR(jit([](Tensor t) { return std::get<0>(unique(t)); })(x), "unique:",
                   "outside the traced function", "sort_test.cpp:");
}

TEST_CASE("long rows sort in O(n) both ways: a traced sort of 200k equals the eager one") {
  const Tensor x = (rand({2, 200000}) * 1000).floor();  // many ties
  auto f = jit([](Tensor t) {
    auto [v, i] = t.sort(1, true);
    return std::make_tuple(v, i, t.argsort(0), randperm(100000));
  });
  auto [v, i, a, p] = f(x);
  auto [ve, ie] = x.sort(1, true);
  CHECK(equal(v, ve));
  CHECK(equal(i, ie));
  CHECK(equal(a, x.argsort(0)));
  CHECK(is_permutation_of_n(p, 100000));
  // Descending and stable: values never rise, and equal values keep their order.
  const std::vector<float> vv = v.to_vector<float>();
  const std::vector<int64_t> ii = i.to_vector<int64_t>();
  for (size_t j = 1; j < vv.size(); ++j) {
    if (j % 200000 == 0) continue;  // the second row starts
    REQUIRE(vv[j - 1] >= vv[j]);
    if (vv[j - 1] == vv[j]) REQUIRE(ii[j - 1] < ii[j]);
  }
}

TEST_CASE("kthvalue and topk of a few from long rows, with ties, NaN and -0.0") {
  const double nan = std::nan("");
  const Tensor x = tensor({3.0, nan, -0.0, 1.0, 0.0, 3.0, -2.0, nan}, kFloat64);
  auto [v, i] = x.kthvalue(2);
  CHECK(v.item<double>() == 0.0);
  CHECK(i.item<int64_t>() == 2);  // -0.0 ties with 0.0 and comes first
  CHECK(std::get<1>(x.kthvalue(3)).item<int64_t>() == 4);
  auto [tv, ti] = x.topk(3);
  CHECK(std::isnan(tv[0].item<double>()));
  CHECK(ti.to_vector<int64_t>() == std::vector<int64_t>{1, 7, 0});  // NaN is the largest; ties by position
  auto [sv, si] = x.topk(2, 0, false);
  CHECK(si.to_vector<int64_t>() == std::vector<int64_t>{6, 2});
  auto [kv, ki] = x.reshape({2, 4}).kthvalue(2, 1, true);
  CHECK(kv.sizes() == Shape{2, 1});
  CHECK(ki.reshape({2}).to_vector<int64_t>() == std::vector<int64_t>{3, 0});
  // A few of a long row (the library's selection) equal the head of a full sort.
  const Tensor big = (randn({3, 50000}) * 10).round();
  auto [bv, bi] = big.topk(5, 1);
  auto [fv, fi] = big.sort(1, true);
  CHECK(equal(bi, fi.narrow(1, 0, 5)));
  CHECK(equal(bv, fv.narrow(1, 0, 5)));
  auto traced = jit([](Tensor t) { return std::get<1>(t.topk(5, 1, false)); });
  CHECK(equal(traced(big), big.argsort(1).narrow(1, 0, 5)));
}

TEST_CASE("unique: sorted distinct values, inverse and counts, each NaN its own value") {
  const double nan = std::nan("");
  const Tensor x = tensor({{2.0, 1.0, 2.0}, {nan, 5.0, 1.0}}, kFloat64);
  auto [u, inv, cnt] = unique(x, true, true, true);
  CHECK(u.numel() == 4);
  CHECK(u.narrow(0, 0, 3).to_vector<double>() == std::vector<double>{1, 2, 5});
  CHECK(std::isnan(u[3].item<double>()));
  CHECK(inv.sizes() == Shape{2, 3});
  CHECK(inv.reshape({6}).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 3, 2, 0});
  CHECK(cnt.to_vector<int64_t>() == std::vector<int64_t>{2, 2, 1, 1});
  auto [ui, none1, none2] = unique(tensor({int64_t(3), int64_t(3), int64_t(-1)}));
  CHECK(ui.to_vector<int64_t>() == std::vector<int64_t>{-1, 3});
  CHECK(ui.dtype() == kInt64);
  CHECK_FALSE(none1.defined());
}
