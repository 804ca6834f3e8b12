// Movement ops: view geometry (what can be a view, with which strides) and
// the copying kernels (reshape, expand, permute, slice, pad), plus copy_to.
#include <doctest/doctest.h>

#include "ir/error.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

Attrs shape_attr(std::vector<int64_t> s) {
  return Attrs{{AttrKey::shape, std::move(s)}};
}
Attrs perm_attr(std::vector<int64_t> p) {
  return Attrs{{AttrKey::perm, std::move(p)}};
}
Attrs slice_attr(int64_t dim, int64_t start, int64_t end, int64_t step) {
  return Attrs{
      {AttrKey::dim, dim}, {AttrKey::start, start}, {AttrKey::end, end}, {AttrKey::step, step}};
}
Attrs pad_attr(int64_t dim, int64_t low, int64_t high, int64_t interior) {
  return Attrs{{AttrKey::dim, dim},
               {AttrKey::low, low},
               {AttrKey::high, high},
               {AttrKey::interior, interior}};
}

struct Geo {
  bool ok;
  ViewGeometry g;
};
Geo geo(OpKind k, const Attrs& a, const Shape& s, const Strides& st) {
  Geo r;
  r.ok = view_geometry(k, a, s, st, &r.g);
  return r;
}

}  // namespace

TEST_CASE("view_geometry: permute, expand, slice") {
  Geo p = geo(OpKind::permute, perm_attr({2, 0, 1}), {2, 3, 4}, {12, 4, 1});
  REQUIRE(p.ok);
  CHECK(p.g.shape == Shape{4, 2, 3});
  CHECK(p.g.strides == Strides{1, 12, 4});
  CHECK(p.g.offset == 0);

  Geo e = geo(OpKind::expand, shape_attr({5, 3, -1}), {3, 1}, {1, 1});
  REQUIRE(e.ok);
  CHECK(e.g.shape == Shape{5, 3, 1});
  CHECK(e.g.strides == Strides{0, 1, 0});
  Geo e2 = geo(OpKind::expand, shape_attr({2, 4}), {1, 4}, {4, 1});
  CHECK(e2.g.strides == Strides{0, 1});
  CHECK_THROWS_AS(geo(OpKind::expand, shape_attr({2, 5}), {3}, {1}), Error);

  Geo s = geo(OpKind::slice, slice_attr(1, 1, 7, 2), {4, 8}, {8, 1});
  REQUIRE(s.ok);
  CHECK(s.g.shape == Shape{4, 3});
  CHECK(s.g.strides == Strides{8, 2});
  CHECK(s.g.offset == 1);
  Geo s2 = geo(OpKind::slice, slice_attr(0, 2, 4, 1), {4, 8}, {8, 1});
  CHECK(s2.g.shape == Shape{2, 8});
  CHECK(s2.g.offset == 16);
  Geo s3 = geo(OpKind::slice, slice_attr(0, 3, 3, 1), {4, 8}, {8, 1});
  CHECK(s3.g.shape == Shape{0, 8});

  // unfold: the windows share the dim's stride (overlapping in memory).
  const Attrs windows{
      {AttrKey::dim, int64_t{1}}, {AttrKey::size, int64_t{3}}, {AttrKey::step, int64_t{2}}};
  Geo w = geo(OpKind::unfold, windows, {4, 8}, {8, 1});
  REQUIRE(w.ok);
  CHECK(w.g.shape == Shape{4, 3, 3});
  CHECK(w.g.strides == Strides{8, 2, 1});
  CHECK(w.g.offset == 0);
  Geo wt = geo(OpKind::unfold, windows, {4, 8}, {1, 4});  // of a transposed [8, 4]
  CHECK(wt.g.strides == Strides{1, 8, 4});
  const Attrs dilated{{AttrKey::dim, int64_t{0}},
                      {AttrKey::size, int64_t{2}},
                      {AttrKey::step, int64_t{1}},
                      {AttrKey::dilation, int64_t{3}}};
  Geo wd = geo(OpKind::unfold, dilated, {5}, {2});
  CHECK(wd.g.shape == Shape{2, 2});
  CHECK(wd.g.strides == Strides{2, 6});
  CHECK_FALSE(geo(OpKind::unfold, windows, {}, {}).ok);

  CHECK_FALSE(geo(OpKind::pad, pad_attr(0, 1, 1, 0), {4}, {1}).ok);
  CHECK_FALSE(geo(OpKind::add, {}, {4}, {1}).ok);
}

TEST_CASE("view_geometry: reshape is a view exactly when torch.view would be") {
  // Contiguous: always.
  Geo c = geo(OpKind::reshape, shape_attr({3, -1}), {2, 3, 2}, {6, 2, 1});
  REQUIRE(c.ok);
  CHECK(c.g.shape == Shape{3, 4});
  CHECK(c.g.strides == Strides{4, 1});
  // Transposed [3,2] (strides [1,3]): flattening needs a copy, adding unit dims does not.
  CHECK_FALSE(geo(OpKind::reshape, shape_attr({6}), {3, 2}, {1, 3}).ok);
  Geo u = geo(OpKind::reshape, shape_attr({3, 1, 2}), {3, 2}, {1, 3});
  REQUIRE(u.ok);
  CHECK(u.g.strides[0] == 1);
  CHECK(u.g.strides[2] == 3);
  // Rows picked with a step: each row stays contiguous, so splitting a row is fine.
  Geo r = geo(OpKind::reshape, shape_attr({2, 2, 4}), {2, 8}, {16, 1});
  REQUIRE(r.ok);
  CHECK(r.g.strides == Strides{16, 4, 1});
  CHECK_FALSE(geo(OpKind::reshape, shape_attr({16}), {2, 8}, {16, 1}).ok);
  // Expanded dims can split but not merge with real ones.
  Geo x = geo(OpKind::reshape, shape_attr({2, 2, 3}), {4, 3}, {0, 1});
  REQUIRE(x.ok);
  CHECK(x.g.strides == Strides{0, 0, 1});
  CHECK_FALSE(geo(OpKind::reshape, shape_attr({12}), {4, 3}, {0, 1}).ok);
  // Scalars.
  Geo sc = geo(OpKind::reshape, shape_attr({1, 1}), {}, {});
  REQUIRE(sc.ok);
  CHECK(sc.g.shape == Shape{1, 1});
}

TEST_CASE("movement kernels copy in row-major order") {
  Arr m = iota(DType::f32, {2, 3});  // [[0,1,2],[3,4,5]]
  Arr t = transposed(m);             // [[0,3],[1,4],[2,5]]
  CHECK(values(run(OpKind::reshape, {t}, shape_attr({6}))) ==
        std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(values(run(OpKind::reshape, {m}, shape_attr({3, 2}))) ==
        std::vector<double>{0, 1, 2, 3, 4, 5});
  CHECK(values(run(OpKind::permute, {m}, perm_attr({1, 0}))) ==
        std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(values(run(OpKind::expand, {f32({2, 1}, {7, 8})}, shape_attr({2, 2, 3}))) ==
        std::vector<double>{7, 7, 7, 8, 8, 8, 7, 7, 7, 8, 8, 8});
  CHECK(values(run(OpKind::slice, {iota(DType::i64, {10})}, slice_attr(0, 1, 10, 4))) ==
        std::vector<double>{1, 5, 9});
  CHECK(values(run(OpKind::slice, {t}, slice_attr(0, 1, 3, 1))) == std::vector<double>{1, 4, 2, 5});

  Arr p3 = iota(DType::i32, {2, 3, 4});
  Arr perm = run(OpKind::permute, {p3}, perm_attr({2, 0, 1}));
  CHECK(perm.v.shape == Shape{4, 2, 3});
  std::vector<double> want;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) want.push_back(i * 12 + j * 4 + k);
  CHECK(values(perm) == want);
}

TEST_CASE("unfold: windows every step, dilated, of a strided input") {
  Arr x = iota(DType::i64, {7}, 0);
  const Attrs a{
      {AttrKey::dim, int64_t{0}}, {AttrKey::size, int64_t{3}}, {AttrKey::step, int64_t{2}}};
  Arr w = run(OpKind::unfold, {x}, a);
  CHECK(w.v.shape == Shape{3, 3});
  CHECK(values(w) == std::vector<double>{0, 1, 2, 2, 3, 4, 4, 5, 6});
  const Attrs d{{AttrKey::dim, int64_t{0}},
                {AttrKey::size, int64_t{2}},
                {AttrKey::step, int64_t{3}},
                {AttrKey::dilation, int64_t{2}}};
  CHECK(values(run(OpKind::unfold, {x}, d)) == std::vector<double>{0, 2, 3, 5});
  Arr m = iota(DType::f32, {2, 3}, 1);  // [[1,2,3],[4,5,6]], read transposed: [3, 2]
  const Attrs rows{
      {AttrKey::dim, int64_t{0}}, {AttrKey::size, int64_t{2}}, {AttrKey::step, int64_t{1}}};
  Arr t = run(OpKind::unfold, {transposed(m)}, rows);
  CHECK(t.v.shape == Shape{2, 2, 2});
  CHECK(values(t) == std::vector<double>{1, 2, 4, 5, 2, 3, 5, 6});
}

TEST_CASE("pad: low, high and interior zeros") {
  Arr x = f32({3}, {1, 2, 3});
  CHECK(values(run(OpKind::pad, {x}, pad_attr(0, 2, 1, 0))) ==
        std::vector<double>{0, 0, 1, 2, 3, 0});
  CHECK(values(run(OpKind::pad, {x}, pad_attr(0, 1, 0, 2))) ==
        std::vector<double>{0, 1, 0, 0, 2, 0, 0, 3});
  Arr m = iota(DType::i64, {2, 2}, 1);  // [[1,2],[3,4]]
  Arr p = run(OpKind::pad, {m}, pad_attr(1, 0, 1, 1));
  CHECK(p.v.shape == Shape{2, 4});
  CHECK(values(p) == std::vector<double>{1, 0, 2, 0, 3, 0, 4, 0});
  Arr q = run(OpKind::pad, {transposed(m)}, pad_attr(0, 1, 0, 0));
  CHECK(values(q) == std::vector<double>{0, 0, 1, 3, 2, 4});
  // Negative low/high crop (accepted by the kernel, as jax.lax.pad).
  Arr crop = empty(DType::f32, {4});
  reference_kernel(OpKind::pad, pad_attr(0, -1, 0, 1), std::vector<View>{x.v}, crop.v);
  CHECK(values(crop) == std::vector<double>{0, 2, 0, 3});
}

TEST_CASE("copy_to: strided sources, casts, transposed tiles") {
  Arr m = iota(DType::f64, {3, 5});
  Arr dst = empty(DType::i32, {5, 3});
  copy_to(transposed(m).v, dst.v);
  std::vector<double> want;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(j * 5 + i);
  CHECK(values(dst) == want);

  // Large enough for the tiled transpose, with ragged tile edges and a batch dim.
  const int64_t b = 2, r = 300, c = 170;
  Arr big = iota(DType::f32, {b, r, c});
  Arr out = empty(DType::f32, {b, c, r});
  copy_to(view_as(big, OpKind::permute, perm_attr({0, 2, 1})).v, out.v);
  int64_t bad = 0;
  for (int64_t n = 0; n < b; ++n)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t j = 0; j < r; ++j)
        bad += out.v.ptr<float>()[(n * c + i) * r + j] != float((n * r + j) * c + i);
  CHECK(bad == 0);
  Arr outd = empty(DType::f64, {b, c, r});
  copy_to(view_as(big, OpKind::permute, perm_attr({0, 2, 1})).v, outd.v);
  CHECK(values(outd) == values(out));

  // 4-byte elements move in 8x8 register blocks: sizes just past a block, and
  // a batch whose matrices start at offsets that are not multiples of 8.
  for (auto [rr, cc] : {std::pair<int64_t, int64_t>{9, 13}, {41, 19}, {64, 8}}) {
    CAPTURE(rr);
    CAPTURE(cc);
    Arr src = iota(DType::i32, {3, rr, cc});
    Arr dsti = empty(DType::i32, {3, cc, rr});
    copy_to(view_as(src, OpKind::permute, perm_attr({0, 2, 1})).v, dsti.v);
    int64_t wrong = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < cc; ++i)
        for (int64_t j = 0; j < rr; ++j)
          wrong += dsti.v.ptr<int32_t>()[(n * cc + i) * rr + j] != (n * rr + j) * cc + i;
    CHECK(wrong == 0);
  }

  CHECK_THROWS_AS(copy_to(m.v, empty(DType::f64, {5, 3}).v), Error);
}
