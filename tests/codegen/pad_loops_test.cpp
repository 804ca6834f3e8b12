// The loop shapes lowering gives padded reads, stated as kernel IR text: rows,
// an image's rows and columns, and an image's plane cut at a pad's edges (and
// where unclamped reads come into bounds), stacked windows, and the sums over
// windows of a depthwise conv's weight gradient.
#include <doctest/doctest.h>

#include <regex>

#include "codegen/kernel_ir.h"
#include "codegen/lower.h"
#include "codegen_test_util.h"
#include "ir/parser.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE(
    "a pad's guard on the last dim cuts the row at its edges; inside, the taps are plain loads") {
  // A depthwise conv's three column taps of a row padded by one on each side.
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[4,30]\n"
      "%1 = pad %0 {dim=1, low=1, high=1, interior=0} : f32[4,32]\n"
      "%2 = slice %1 {dim=1, start=0, end=30, step=1} : f32[4,30]\n"
      "%3 = slice %1 {dim=1, start=1, end=31, step=1} : f32[4,30]\n"
      "%4 = slice %1 {dim=1, start=2, end=32, step=1} : f32[4,30]\n"
      "%5 = add %2, %3 : f32[4,30]\n"
      "%6 = add %5, %4 : f32[4,30]\n"
      "return %6\n",
      GroupKind::Elementwise);
  REQUIRE(got.find("for i1 in [0, 1)") != std::string::npos);
  REQUIRE(got.find("for i2 in [0, 28)") != std::string::npos);
  REQUIRE(got.find("for i3 in [0, 1)") != std::string::npos);
  const std::string inside =
      got.substr(got.find("for i2"), got.find("for i3") - got.find("for i2"));
  CHECK(inside.find("select") == std::string::npos);
  CHECK(inside.find(" ge ") == std::string::npos);
  CHECK(occurrences(inside, "load") == 3);
  // At the edges one tap reads the fill: two loads each, no guard left either.
  const std::string first = got.substr(got.find("for i1"), got.find("for i2") - got.find("for i1"));
  CHECK(first.find("select") == std::string::npos);
}

TEST_CASE("a pad's guards on two dims cut both loops of an image; inside, no guard is left") {
  // A depthwise conv's nine taps of an image padded by one on each side, its
  // rows and columns looped over separately (the input's reshape merges them):
  // each loop is cut at the pads' edges, 3 x 3 loop bodies.
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[4,900]\n"
      "%1 = reshape %0 {shape=[4,30,30]} : f32[4,30,30]\n"
      "%2 = pad %1 {dim=1, low=1, high=1, interior=0} : f32[4,32,30]\n"
      "%3 = pad %2 {dim=2, low=1, high=1, interior=0} : f32[4,32,32]\n"
      "%4 = slice %3 {dim=1, start=0, end=30, step=1} : f32[4,30,32]\n"
      "%5 = slice %4 {dim=2, start=0, end=30, step=1} : f32[4,30,30]\n"
      "%6 = slice %3 {dim=1, start=0, end=30, step=1} : f32[4,30,32]\n"
      "%7 = slice %6 {dim=2, start=1, end=31, step=1} : f32[4,30,30]\n"
      "%8 = add %5, %7 : f32[4,30,30]\n"
      "%9 = slice %3 {dim=1, start=0, end=30, step=1} : f32[4,30,32]\n"
      "%10 = slice %9 {dim=2, start=2, end=32, step=1} : f32[4,30,30]\n"
      "%11 = add %8, %10 : f32[4,30,30]\n"
      "%12 = slice %3 {dim=1, start=1, end=31, step=1} : f32[4,30,32]\n"
      "%13 = slice %12 {dim=2, start=0, end=30, step=1} : f32[4,30,30]\n"
      "%14 = add %11, %13 : f32[4,30,30]\n"
      "%15 = slice %3 {dim=1, start=1, end=31, step=1} : f32[4,30,32]\n"
      "%16 = slice %15 {dim=2, start=1, end=31, step=1} : f32[4,30,30]\n"
      "%17 = add %14, %16 : f32[4,30,30]\n"
      "%18 = slice %3 {dim=1, start=1, end=31, step=1} : f32[4,30,32]\n"
      "%19 = slice %18 {dim=2, start=2, end=32, step=1} : f32[4,30,30]\n"
      "%20 = add %17, %19 : f32[4,30,30]\n"
      "%21 = slice %3 {dim=1, start=2, end=32, step=1} : f32[4,30,32]\n"
      "%22 = slice %21 {dim=2, start=0, end=30, step=1} : f32[4,30,30]\n"
      "%23 = add %20, %22 : f32[4,30,30]\n"
      "%24 = slice %3 {dim=1, start=2, end=32, step=1} : f32[4,30,32]\n"
      "%25 = slice %24 {dim=2, start=1, end=31, step=1} : f32[4,30,30]\n"
      "%26 = add %23, %25 : f32[4,30,30]\n"
      "%27 = slice %3 {dim=1, start=2, end=32, step=1} : f32[4,30,32]\n"
      "%28 = slice %27 {dim=2, start=2, end=32, step=1} : f32[4,30,30]\n"
      "%29 = add %26, %28 : f32[4,30,30]\n"
      "return %29\n",
      GroupKind::Elementwise);
  CAPTURE(got);
  REQUIRE(!divides(got));
  // The interior: rows [1, 29) (an outer loop, at the kernel's first indent)
  // and in them columns [1, 29), nine plain loads and no guard.
  size_t rows = got.find("\n  for i");
  while (rows != std::string::npos &&
         got.substr(rows, got.find('\n', rows + 1) - rows).find("in [0, 28)") == std::string::npos)
    rows = got.find("\n  for i", rows + 1);
  REQUIRE(rows != std::string::npos);
  const size_t cols = got.find("in [0, 28)", got.find('\n', rows + 1));
  REQUIRE(cols != std::string::npos);
  const std::string inside = got.substr(cols, got.find("in [0, 1)", cols) - cols);
  CHECK(inside.find("select") == std::string::npos);
  CHECK(inside.find(" ge ") == std::string::npos);
  CHECK(inside.find(" le ") == std::string::npos);
  CHECK(occurrences(inside, "load") == 9);
  CHECK(occurrences(got, "for i") == 3 + 3 * 3);
  // No guard anywhere: at the edges the taps outside read the fill.
  CHECK(got.find("select") == std::string::npos);
}

TEST_CASE("64 images' taps run over each image's plane, cut where the reads come into bounds") {
  // A depthwise conv's nine taps of 64 images of 16x16 padded by one on each
  // side (lower.cpp's plane form): one loop over the plane's 256 positions,
  // cut at the first and last rows' edges (16, 240), where the taps' unclamped
  // reads come into bounds (17, 239; 1 in the first row, 255 in the last) and
  // where the first row's column guards fold (15). Between 17 and 239, nine
  // loads at the position plus a constant, the edge columns' guards tables.
  Graph g;
  Builder b(g);
  Value p = b.arg(0, ty(DType::f32, {64, 16, 16}));
  for (int64_t d : {1, 2})
    p = b.op(OpKind::pad, {p},
             Attrs{{AttrKey::dim, d},
                   {AttrKey::low, int64_t{1}},
                   {AttrKey::high, int64_t{1}},
                   {AttrKey::interior, int64_t{0}}});
  Value sum;
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t e = 0; e < 3; ++e) {
      Value tap = p;
      for (auto [d, at] : {std::pair{int64_t{1}, a}, std::pair{int64_t{2}, e}})
        tap = b.op(OpKind::slice, {tap},
                   Attrs{{AttrKey::dim, d},
                         {AttrKey::start, at},
                         {AttrKey::end, at + 16},
                         {AttrKey::step, int64_t{1}}});
      tap = b.mul(tap, b.scalar_like(tap, double(a * 3 + e)));
      sum = a + e == 0 ? tap : b.add(sum, tap);
    }
  g.outputs = {sum};
  const std::string got = lowered(g, GroupKind::Elementwise);
  CAPTURE(got);
  CHECK(got.find("parallel i0 in [0, 64)") != std::string::npos);
  CHECK(loop_extents(got) == std::vector<int64_t>{1, 14, 1, 1, 222, 1, 15, 1});
  const size_t from = got.find("in [0, 222)"), to = got.find("for", from);
  const std::string middle = got.substr(from, to - from);
  CHECK(occurrences(middle, "load buf0") == 9);
  CHECK(std::regex_search(middle, std::regex(R"(select [^\n]*: i64)")) == false);
  CHECK(std::regex_search(middle, std::regex(R"(table table0\[%\d+\] : i32)")));
  CHECK(std::regex_search(middle, std::regex(R"(table table1\[%\d+\] : i32)")));
  CHECK(!divides(middle));  // the plane position alone indexes every read and the store
}

TEST_CASE("a padded image's windows, stacked by tap in both dims, are one load an element") {
  // conv2d's patches traced (nn_conv.cpp's stacked_taps): the padded image read
  // at three rows and three columns, in one kernel (fusion's recomputable).
  const char* ir =
      "%0 = arg {index=0} : f32[2,20,20]\n"
      "%1 = pad %0 {dim=1, low=1, high=1, interior=0} : f32[2,22,20]\n"
      "%2 = pad %1 {dim=2, low=1, high=1, interior=0} : f32[2,22,22]\n"
      "%3 = slice %2 {dim=1, start=0, end=20, step=1} : f32[2,20,22]\n"
      "%4 = slice %2 {dim=1, start=1, end=21, step=1} : f32[2,20,22]\n"
      "%5 = reshape %3 {shape=[2,1,20,22]} : f32[2,1,20,22]\n"
      "%6 = reshape %4 {shape=[2,1,20,22]} : f32[2,1,20,22]\n"
      "%7 = pad %5 {dim=1, low=0, high=1, interior=0} : f32[2,2,20,22]\n"
      "%8 = pad %6 {dim=1, low=1, high=0, interior=0} : f32[2,2,20,22]\n"
      "%9 = add %7, %8 : f32[2,2,20,22]\n"
      "%10 = slice %9 {dim=3, start=0, end=20, step=1} : f32[2,2,20,20]\n"
      "%11 = slice %9 {dim=3, start=1, end=21, step=1} : f32[2,2,20,20]\n"
      "%12 = reshape %10 {shape=[2,2,1,20,20]} : f32[2,2,1,20,20]\n"
      "%13 = reshape %11 {shape=[2,2,1,20,20]} : f32[2,2,1,20,20]\n"
      "%14 = pad %12 {dim=2, low=0, high=1, interior=0} : f32[2,2,2,20,20]\n"
      "%15 = pad %13 {dim=2, low=1, high=0, interior=0} : f32[2,2,2,20,20]\n"
      "%16 = add %14, %15 : f32[2,2,2,20,20]\n"
      "return %16\n";
  Graph g = parse_graph(ir);
  const std::vector<FusionGroup> groups = plan_fusion(g, FusionOptions{});
  REQUIRE(groups.size() == 1);
  const std::string got = lowered(ir, groups[0].kind);
  CHECK(got.find("load") == got.rfind("load"));
  // The row is not cut at the column pad's edges: the taps' choice is a select
  // per element anyway (Lowering::pad_read).
  CHECK(got.find("for i2") == std::string::npos);
}

// A depthwise conv's weight gradient (nn_conv.cpp's DepthwiseTaps): the sum
// over batch and pixels of x times the windows of padded dY, kept [C, kH, kW].
std::string weight_gradient_ir(const std::string& kernel, const std::string& dilation) {
  const int64_t kh = kernel[0] - '0', kw = kernel[2] - '0', d = dilation[0] - '0';
  const int64_t hp = 12 + (kh - 1) * d, wp = 12 + (kw - 1) * d;
  auto dims = [](std::initializer_list<int64_t> l) {
    std::string s;
    for (int64_t v : l) s += (s.empty() ? "" : ",") + std::to_string(v);
    return s;
  };
  const std::string k = std::to_string(kh), w = std::to_string(kw);
  return "%0 = arg {index=0} : f32[" + dims({2, 3, hp, wp}) + "]\n" +
         "%1 = arg {index=1} : f32[2,3,12,12]\n" + "%2 = unfold %0 {dim=2, size=" + k +
         ", step=1, dilation=" + dilation + "} : f32[" + dims({2, 3, 12, wp, kh}) + "]\n" +
         "%3 = unfold %2 {dim=3, size=" + w + ", step=1, dilation=" + dilation + "} : f32[" +
         dims({2, 3, 12, 12, kh, kw}) + "]\n" + "%4 = permute %3 {perm=[0,1,4,5,2,3]} : f32[" +
         dims({2, 3, kh, kw, 12, 12}) + "]\n" +
         "%5 = reshape %1 {shape=[2,3,1,1,12,12]} : f32[2,3,1,1,12,12]\n" +
         "%6 = mul %4, %5 : f32[" + dims({2, 3, kh, kw, 12, 12}) + "]\n" +
         "%7 = sum %6 {dims=[0,4,5], keepdim=0} : f32[" + dims({3, kh, kw}) + "]\n" + "return %7\n";
}

TEST_CASE("a sum over windows folds its rows' taps in one pass, each input element read once") {
  // [3, 3, 3]: a row per channel, nine accumulators, x (buf1) loaded once an element.
  const std::string got = lowered(weight_gradient_ir("3x3", "1"), GroupKind::Reduction);
  CHECK(got.find("parallel i0 in [0, 3)") != std::string::npos);
  CHECK(got.find("acc8 = sum f32") != std::string::npos);
  CHECK(got.find("acc9") == std::string::npos);
  CHECK(got.find("load buf1") == got.rfind("load buf1"));
  // Windows of 5x4 are 20 rows a channel, more than 16: the 4 of a row of
  // taps are folded together, 15 rows (channel, tap row) each.
  const std::string wide = lowered(weight_gradient_ir("5x4", "1"), GroupKind::Reduction);
  CHECK(wide.find("parallel i0 in [0, 15)") != std::string::npos);
  CHECK(wide.find("acc3 = sum f32") != std::string::npos);
  CHECK(wide.find("acc4") == std::string::npos);
  // The same sum with no windows (each row reads its own elements) folds one row at a time.
  const std::string plain = lowered(
      "%0 = arg {index=0} : f32[2,3,3,3,12,12]\n"
      "%1 = sum %0 {dims=[0,4,5], keepdim=0} : f32[3,3,3]\n"
      "return %1\n",
      GroupKind::Reduction);
  CHECK(plain.find("parallel i0 in [0, 27)") != std::string::npos);
  CHECK(plain.find("acc1") == std::string::npos);
}

// The weight gradient with its pad in the kernel (fusion takes it in for a
// long sum over the windows' positions): x read in place. The loop over an
// image's plane (12x12, flat) is cut at its first and last rows' edges (12,
// 132), where the rows' guards fold; then where each tap's unclamped read
// comes into bounds: 13 and 131 between them (the corner taps reach 13
// positions back and forward), 1 in the first row and 143 in the last (the
// middle row's taps reach one); and in the first row, where the column is the
// loop's position, also at 11, where the column guards fold. Between 13 and
// 131 every read is one load at the plane position plus a constant, its column
// guard a select of the loaded value (no clamp of the index), the guard a
// table's value.
TEST_CASE("a sum over windows of a padded input reads it in place, its plane cut into bounds") {
  const Graph g = padded_window_sum({2, 3, 12, 12, 3, 3, 1, 1, 1, 1});
  const std::string got = lowered(g, GroupKind::Reduction);
  CAPTURE(got);
  CHECK(got.find("buf0 = in f32[2,3,12,12]") != std::string::npos);  // x, not a padded copy
  // The loops inside the rows and images, by their extents: the plane's
  // segments [0,1) [1,11) [11,12) [12,13) [13,131) [131,132) [132,143) [143,144).
  CHECK(loop_extents(got) == std::vector<int64_t>{2, 1, 10, 1, 1, 118, 1, 11, 1});
  // The middle segment: nine loads of x, none at a clamped (selected) index.
  const size_t from = got.find("in [0, 118)"), to = got.find("for", from);
  const std::string middle = got.substr(from, to - from);
  CAPTURE(middle);
  CHECK(occurrences(middle, "load buf0") == 9);
  CHECK(middle.find("select") != std::string::npos);  // the column guards, on the values
  CHECK(std::regex_search(middle, std::regex(R"(select [^\n]*: i64)")) == false);
  // The first and last columns' guards are tables over the plane, loaded at its
  // position (column_guard): 0 where the column is a pad's.
  CHECK(got.find("table0 = i32[144] {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1,") !=
        std::string::npos);
  CHECK(got.find("table1 = i32[144] {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1,") != std::string::npos);
  CHECK(got.find("table2") == std::string::npos);
  CHECK(std::regex_search(middle, std::regex(R"(table table0\[%\d+\] : i32)")));
}
