// The kernel IR: printing, verification, the builder's folding and CSE, and
// the loop shapes lowering chooses (stated as kernel IR text; those of padded
// reads in pad_loops_test.cpp).
#include <doctest/doctest.h>

#include <set>

#include "codegen/kernel_builder.h"
#include "codegen/kernel_ir.h"
#include "codegen/lower.h"
#include "codegen_test_util.h"
#include "ir/parser.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("the kernel IR's elementwise scalar ops come from the op table's scalar column") {
  std::set<std::string> spellings;
  for (int i = 0; i <= int(kir::ScalarOp::imod); ++i)
    CHECK(spellings.insert(std::string(kir::scalar_op_name(kir::ScalarOp(i)))).second);
  for (OpKind k : all_ops()) {
    CAPTURE(op_name(k));
    const ScalarRule rule = op_info(k).scalar;
    if (rule == ScalarRule::none || rule == ScalarRule::custom || rule == ScalarRule::reduce ||
        rule == ScalarRule::argreduce || rule == ScalarRule::scan || rule == ScalarRule::decomp) {
      CHECK_THROWS_AS(kir::scalar_op_of(k), Error);
      continue;
    }
    const kir::ScalarOp s = kir::scalar_op_of(k);
    CHECK(kir::scalar_op_rule(s) == rule);
    CHECK(kir::scalar_op_arity(s) == op_info(k).arity);
    CHECK(kir::is_float_only(s) == is_math(k));
  }
  CHECK(kir::scalar_op_name(kir::scalar_op_of(OpKind::maximum)) == "max");
  CHECK(kir::scalar_op_name(kir::scalar_op_of(OpKind::logical_not)) == "not");
  CHECK(kir::scalar_op_name(kir::ScalarOp::load) == "load");
  CHECK(kir::scalar_op_rule(kir::ScalarOp::select) == ScalarRule::none);
  CHECK(kir::is_comparison(kir::scalar_op_of(OpKind::le)));
}

TEST_CASE("a same-shape elementwise chain is one flat loop on the linear index") {
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[64,100]\n"
      "%1 = arg {index=1} : f32[64,100]\n"
      "%2 = exp %0 : f32[64,100]\n"
      "%3 = mul %2, %1 : f32[64,100]\n"
      "return %3\n",
      GroupKind::Elementwise);
  CHECK(got ==
        "  buf0 = in f32[64,100]\n"
        "  buf1 = in f32[64,100]\n"
        "  buf2 = out f32[64,100]\n"
        "parallel i0 in [0, 6400):\n"
        "  %0 = index i0 : i64\n"
        "  %1 = load buf0[%0] : f32\n"
        "  %2 = exp %1 : f32\n"
        "  %3 = load buf1[%0] : f32\n"
        "  %4 = mul %2, %3 : f32\n"
        "  store buf2[%0] = %4\n");
}

TEST_CASE("a broadcast bias splits rows so the inner loop stays contiguous") {
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[64,100]\n"
      "%1 = arg {index=1} : f32[100]\n"
      "%2 = add %0, %1 : f32[64,100]\n"
      "%3 = relu %2 : f32[64,100]\n"
      "return %3\n",
      GroupKind::Elementwise);
  CHECK(got ==
        "  buf0 = in f32[64,100]\n"
        "  buf1 = in f32[100]\n"
        "  buf2 = out f32[64,100]\n"
        "parallel i0 in [0, 64):\n"
        "  %0 = index i0 : i64\n"
        "  %1 = const 100 : i64\n"
        "  %2 = mul %0, %1 : i64\n"
        "  for i1 in [0, 100):\n"
        "    %3 = index i1 : i64\n"
        "    %4 = add %2, %3 : i64\n"
        "    %5 = load buf0[%4] : f32\n"
        "    %6 = load buf1[%3] : f32\n"
        "    %7 = add %5, %6 : f32\n"
        "    %8 = relu %7 : f32\n"
        "    store buf2[%4] = %8\n");
}

TEST_CASE("a last dim that a reshape merges becomes nested loops with no division per element") {
  // im2col's pattern: a permute, then a reshape merging dims into the last one. The
  // [4 x 32] pieces of the last dim are two loops; the reshape's coordinates fold.
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[4,16,32]\n"
      "%1 = permute %0 {perm=[1, 0, 2]} : f32[16,4,32]\n"
      "%2 = reshape %1 {shape=[16, 128]} : f32[16,128]\n"
      "return %2\n",
      GroupKind::Copy);
  CHECK(got ==
        "  buf0 = in f32[4,16,32]\n"
        "  buf1 = out f32[16,128]\n"
        "parallel i0 in [0, 16):\n"
        "  %0 = index i0 : i64\n"
        "  %1 = const 4 : i64\n"
        "  %2 = mul %0, %1 : i64\n"
        "  for i1 in [0, 4):\n"
        "    %3 = index i1 : i64\n"
        "    %4 = add %2, %3 : i64\n"
        "    %5 = const 32 : i64\n"
        "    %6 = mul %4, %5 : i64\n"
        "    for i2 in [0, 32):\n"
        "      %7 = index i2 : i64\n"
        "      %8 = add %6, %7 : i64\n"
        "      %9 = const 16 : i64\n"
        "      %10 = mul %3, %9 : i64\n"
        "      %11 = add %0, %10 : i64\n"
        "      %12 = mul %5, %11 : i64\n"
        "      %13 = add %7, %12 : i64\n"
        "      %14 = load buf0[%13] : f32\n"
        "      store buf1[%8] = %14\n");
  CHECK(!divides(got));
  // Pieces shorter than 16 stay one loop (the innermost loop must vectorise).
  const std::string short_rows = lowered(
      "%0 = arg {index=0} : f32[4,16,8]\n"
      "%1 = permute %0 {perm=[1, 0, 2]} : f32[16,4,8]\n"
      "%2 = reshape %1 {shape=[16, 32]} : f32[16,32]\n"
      "return %2\n",
      GroupKind::Copy);
  CHECK(short_rows.find("for i2") == std::string::npos);
  CHECK(short_rows.find("for i1 in [0, 32)") != std::string::npos);
}

TEST_CASE("a last dim whose dims a permute moved splits as those dims") {
  // A conv weight gradient's patches, [N H'W', C kH kW], read from windows laid out
  // [N, kH, C, kW, H', W']: the trailing pieces of the reshape (16, 48) do not
  // match the last dim's own dims, which are [C, kH, kW] = [16, 3, 3] in the
  // middle of the reshape's operand; as loops, nothing divides per element.
  const char* ir =
      "%0 = arg {index=0} : f32[2,3,16,3,4,4]\n"
      "%1 = permute %0 {perm=[0, 2, 1, 3, 4, 5]} : f32[2,16,3,3,4,4]\n"
      "%2 = reshape %1 {shape=[2, 144, 16]} : f32[2,144,16]\n"
      "%3 = permute %2 {perm=[0, 2, 1]} : f32[2,16,144]\n"
      "%4 = reshape %3 {shape=[32, 144]} : f32[32,144]\n"
      "return %4\n";
  const std::string got = lowered(ir, GroupKind::Copy);
  Graph g = parse_graph(ir);
  CHECK(got.find("for i1 in [0, 16)") != std::string::npos);
  CHECK(got.find("for i2 in [0, 3)") != std::string::npos);
  CHECK(got.find("for i3 in [0, 3)") != std::string::npos);
  // What divides (by 16 and 4, the row's H' W') is shifts, once per row.
  CHECK(kir::divisions_per_iteration(
            lower_group(g, make_group(g, GroupKind::Copy, all_compute_nodes(g)))) == 0);
}

TEST_CASE("divisions per iteration: by what they depend on, powers of two free") {
  kir::KernelBuilder kb("t");
  using kir::ScalarOp;
  const kir::ValueId row = kb.index(0);
  kb.binary(ScalarOp::idiv, row, kb.iconst(3));  // once per row
  const kir::ValueId j = kb.index(kb.begin_loop(10));
  kb.binary(ScalarOp::imod, j, kb.iconst(5));    // 10 times
  kb.binary(ScalarOp::imod, j, kb.iconst(8));    // a mask: free
  kb.binary(ScalarOp::idiv, row, kb.iconst(7));  // the row's: hoisted, once
  kb.end_loop();
  CHECK(kir::divisions_per_iteration(kb.kernel()) == 12);
}

TEST_CASE("a row index divided by a multiple of the row length divides once per row") {
  // A bias broadcast over [N, C, H*W] written as [N, C, H, W]: the channel comes
  // from the row index alone.
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[2,3,80]\n"
      "%1 = arg {index=1} : f32[3,1]\n"
      "%2 = add %0, %1 : f32[2,3,80]\n"
      "%3 = reshape %2 {shape=[2, 3, 4, 20]} : f32[2,3,4,20]\n"
      "%4 = relu %3 : f32[2,3,4,20]\n"
      "return %4\n",
      GroupKind::Elementwise);
  const std::string inner = got.substr(got.find("for i1"));
  CHECK(!divides(inner));
  CHECK(got.find("imod") != std::string::npos);  // before the loop, per row
  // The rows are the product's [2, 3] of 80, not [2, 3, 4] of 20.
  CHECK(got.find("parallel i0 in [0, 6)") != std::string::npos);
  CHECK(got.find("for i1 in [0, 80)") != std::string::npos);
}

TEST_CASE("short rows split too: a conv's padded image divides once per image of 10 x 10") {
  // conv2d's first step on the digits (8x8 images, padding 1): flat, each element
  // divided by 10 three times; as rows, only the row index is taken apart, and
  // as images with their rows and columns as loops, only the image index.
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[64,1,8,8]\n"
      "%1 = pad %0 {dim=2, high=1, interior=0, low=1} : f32[64,1,10,8]\n"
      "%2 = pad %1 {dim=3, high=1, interior=0, low=1} : f32[64,1,10,10]\n"
      "return %2\n",
      GroupKind::Copy);
  CAPTURE(got);
  REQUIRE(got.find("parallel i0 in [0, 64)") != std::string::npos);
  // Rows and columns are cut at the pads' edges: the fill, the 8 read elements,
  // the fill; the interior rows' 8 elements read with no guard.
  REQUIRE(got.find("for i1 in [0, 1)") != std::string::npos);
  CHECK(got.find("for i5 in [0, 8)") != std::string::npos);
  CHECK(got.find("for i7 in [0, 8)") != std::string::npos);
  CHECK(got.find("select") == std::string::npos);
  const std::string inner = got.substr(got.find("for i1"));
  CHECK(!divides(inner));
  // A few images (a batch of one RGB image) stay in rows, enough to share
  // among threads: 3 x 10 rows, each cut at the pad's edges.
  const std::string few = lowered(
      "%0 = arg {index=0} : f32[1,3,8,8]\n"
      "%1 = pad %0 {dim=2, high=1, interior=0, low=1} : f32[1,3,10,8]\n"
      "%2 = pad %1 {dim=3, high=1, interior=0, low=1} : f32[1,3,10,10]\n"
      "return %2\n",
      GroupKind::Copy);
  CHECK(few.find("parallel i0 in [0, 30)") != std::string::npos);
  // A single dim has no rows to split.
  const std::string one_dim = lowered(
      "%0 = arg {index=0} : f32[8]\n"
      "%1 = pad %0 {dim=0, high=1, interior=0, low=1} : f32[10]\n"
      "return %1\n",
      GroupKind::Copy);
  CHECK(one_dim.find("for i1") == std::string::npos);
}

TEST_CASE("softmax lowers to three inner loops and computes exp once per element") {
  // The sum's loop keeps exp(x - max) in the output buffer; the last loop reads it back.
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[8,32]\n"
      "%1 = max %0 {dims=[1], keepdim=1} : f32[8,1]\n"
      "%2 = sub %0, %1 : f32[8,32]\n"
      "%3 = exp %2 : f32[8,32]\n"
      "%4 = sum %3 {dims=[1], keepdim=1} : f32[8,1]\n"
      "%5 = div %3, %4 : f32[8,32]\n"
      "return %5\n",
      GroupKind::Reduction);
  const std::string body = got.substr(got.find("  acc0 = max f32"));
  CHECK(body ==
        "  acc0 = max f32\n"
        "  acc1 = sum f32\n"
        "parallel i0 in [0, 8):\n"
        "  %0 = index i0 : i64\n"
        "  %1 = const 32 : i64\n"
        "  %2 = mul %0, %1 : i64\n"
        "  acc0 = init\n"
        "  for i1 in [0, 32):\n"
        "    %3 = index i1 : i64\n"
        "    %4 = add %2, %3 : i64\n"
        "    %5 = load buf0[%4] : f32\n"
        "    acc0 <- %5\n"
        "  acc1 = init\n"
        "  for i2 in [0, 32):\n"
        "    %6 = index i2 : i64\n"
        "    %7 = add %2, %6 : i64\n"
        "    %8 = load buf0[%7] : f32\n"
        "    %9 = acc acc0 : f32\n"
        "    %10 = sub %8, %9 : f32\n"
        "    %11 = exp %10 : f32\n"
        "    acc1 <- %11\n"
        "    store buf1[%7] = %11\n"
        "  for i3 in [0, 32):\n"
        "    %12 = index i3 : i64\n"
        "    %13 = add %2, %12 : i64\n"
        "    %14 = load buf1[%13] : f32\n"
        "    %15 = acc acc1 : f32\n"
        "    %16 = div %14, %15 : f32\n"
        "    store buf1[%13] = %16\n");
}

TEST_CASE("a reduction keeps its operand only when a later output reuses an expensive one") {
  // log-softmax's last loop does not use the exp; layer norm's d*d is cheap.
  const std::string log_softmax = lowered(
      "%0 = arg {index=0} : f32[8,32]\n"
      "%1 = max %0 {dims=[1], keepdim=1} : f32[8,1]\n"
      "%2 = sub %0, %1 : f32[8,32]\n"
      "%3 = exp %2 : f32[8,32]\n"
      "%4 = sum %3 {dims=[1], keepdim=1} : f32[8,1]\n"
      "%5 = log %4 : f32[8,1]\n"
      "%6 = sub %2, %5 : f32[8,32]\n"
      "return %6\n",
      GroupKind::Reduction);
  CHECK(log_softmax.find("load buf1") == std::string::npos);
  const std::string centred = lowered(
      "%0 = arg {index=0} : f32[8,32]\n"
      "%1 = max %0 {dims=[1], keepdim=1} : f32[8,1]\n"
      "%2 = sub %0, %1 : f32[8,32]\n"
      "%3 = sum %2 {dims=[1], keepdim=1} : f32[8,1]\n"
      "%4 = mul %2, %3 : f32[8,32]\n"
      "return %4\n",
      GroupKind::Reduction);
  CHECK(centred.find("load buf1") == std::string::npos);
  // An exp of another dtype than the output cannot be kept in it.
  const std::string cast = lowered(
      "%0 = arg {index=0} : f32[8,32]\n"
      "%1 = exp %0 : f32[8,32]\n"
      "%2 = sum %1 {dims=[1], keepdim=1} : f32[8,1]\n"
      "%3 = div %1, %2 : f32[8,32]\n"
      "%4 = cast %3 {dtype=f64} : f64[8,32]\n"
      "return %4\n",
      GroupKind::Reduction);
  CHECK(cast.find("load buf1") == std::string::npos);
  CHECK(cast.find("exp") != cast.rfind("exp"));
}

TEST_CASE("pad lowers to a clamped read and a select") {
  const std::string got = lowered(
      "%0 = arg {index=0} : f64[5]\n"
      "%1 = pad %0 {dim=0, high=1, interior=1, low=2} : f64[12]\n"
      "return %1\n",
      GroupKind::Copy);
  CHECK(got.find("select") != std::string::npos);
  CHECK(got.find("idiv") != std::string::npos);
  CHECK(got.find("imod") != std::string::npos);
  MESSAGE(got);
}

TEST_CASE("pad's clamped read is bounded, so its operand's index comes apart by folding") {
  // col2im's pattern: a padded row read through a slice and a reshape; the read
  // position row*28 + off, off in [0, 28), splits back into (row, off) without a
  // division per element.
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[8,3,28]\n"
      "%1 = slice %0 {dim=1, start=1, end=2, step=1} : f32[8,1,28]\n"
      "%2 = reshape %1 {shape=[8, 28]} : f32[8,28]\n"
      "%3 = pad %2 {dim=1, high=0, interior=0, low=4} : f32[8,32]\n"
      "return %3\n",
      GroupKind::Copy);
  // Cut at the pad's edge: the fill, then the row read without a guard.
  REQUIRE(got.find("for i1 in [0, 4)") != std::string::npos);
  REQUIRE(got.find("for i2 in [0, 28)") != std::string::npos);
  const std::string inner = got.substr(got.find("for i1"));
  CHECK(!divides(inner));
  CHECK(got.substr(got.find("for i2")).find("select") == std::string::npos);
}

TEST_CASE("cat and stack choose their piece per element and read it once") {
  // Two pads of one input along dim 0 whose spans cover it (cat): one load at a
  // chosen index, no float adds. Overlapping spans still read both and add.
  const std::string got = lowered(
      "%0 = arg {index=0} : f32[2,32]\n"
      "%1 = pad %0 {dim=0, high=2, interior=0, low=0} : f32[4,32]\n"
      "%2 = pad %0 {dim=0, high=0, interior=0, low=2} : f32[4,32]\n"
      "%3 = add %1, %2 : f32[4,32]\n"
      "return %3\n",
      GroupKind::Copy);
  CHECK(got ==
        "  buf0 = in f32[2,32]\n"
        "  buf1 = out f32[4,32]\n"
        "parallel i0 in [0, 4):\n"
        "  %0 = index i0 : i64\n"
        "  %1 = const 32 : i64\n"
        "  %2 = mul %0, %1 : i64\n"
        "  for i1 in [0, 32):\n"
        "    %3 = index i1 : i64\n"
        "    %4 = const 0 : i64\n"
        "    %5 = add %2, %3 : i64\n"
        "    %6 = const 2 : i64\n"
        "    %7 = ge %0, %6 : bool\n"
        "    %8 = sub %0, %6 : i64\n"
        "    %9 = select %7, %8, %4 : i64\n"
        "    %10 = mul %1, %9 : i64\n"
        "    %11 = const 1 : i64\n"
        "    %12 = le %0, %11 : bool\n"
        "    %13 = select %12, %0, %4 : i64\n"
        "    %14 = mul %1, %13 : i64\n"
        "    %15 = select %12, %14, %10 : i64\n"
        "    %16 = add %3, %15 : i64\n"
        "    %17 = load buf0[%16] : f32\n"
        "    store buf1[%5] = %17\n");
  const std::string overlap = lowered(
      "%0 = arg {index=0} : f32[2,32]\n"
      "%1 = pad %0 {dim=0, high=1, interior=0, low=0} : f32[3,32]\n"
      "%2 = pad %0 {dim=0, high=0, interior=0, low=1} : f32[3,32]\n"
      "%3 = add %1, %2 : f32[3,32]\n"
      "return %3\n",
      GroupKind::Copy);
  CHECK(overlap.find("load") != overlap.rfind("load"));
  CHECK(overlap.find("add %") != std::string::npos);
}

TEST_CASE("the builder folds integer identities and shares equal values") {
  kir::KernelBuilder kb("t");
  const kir::ValueId i = kb.index(0);
  CHECK(kb.binary(kir::ScalarOp::mul, i, kb.iconst(1)) == i);
  CHECK(kb.binary(kir::ScalarOp::add, kb.iconst(0), i) == i);
  CHECK(kb.binary(kir::ScalarOp::idiv, i, kb.iconst(1)) == i);
  CHECK(kb.is_const(kb.binary(kir::ScalarOp::imod, i, kb.iconst(1))));
  CHECK(kb.const_value(kb.binary(kir::ScalarOp::mul, kb.iconst(6), kb.iconst(7))) == 42);
  const kir::ValueId a = kb.binary(kir::ScalarOp::add, i, kb.iconst(3));
  CHECK(kb.binary(kir::ScalarOp::add, kb.iconst(3), i) == a);
  // A value made inside a loop is not visible after it: building it again makes a new one.
  const int32_t l = kb.begin_loop(4);
  const kir::ValueId j = kb.index(l);
  const kir::ValueId inner = kb.binary(kir::ScalarOp::add, a, kb.iconst(5));
  CHECK(kb.binary(kir::ScalarOp::add, a, kb.iconst(5)) == inner);
  (void)j;
  kb.end_loop();
  CHECK(kb.binary(kir::ScalarOp::add, a, kb.iconst(5)) != inner);
  kir::Kernel k = kb.take();
  kir::verify_kernel(k);
}

TEST_CASE("the builder decides comparisons by the ranges of their operands") {
  kir::KernelBuilder kb("t");
  const kir::ValueId row = kb.index(0);
  kb.set_upper_bound(row, 4);  // [0, 3]
  auto truth = [&](kir::ValueId v) { return kb.is_const(v) ? int(kb.const_value(v)) : -1; };
  const int32_t l = kb.begin_loop(30);
  // j + 1 for j in [0, 30): [1, 30], a pad's position inside the row cut at its edges.
  const kir::ValueId x = kb.binary(kir::ScalarOp::add, kb.index(l), kb.iconst(1));
  CHECK(truth(kb.binary(kir::ScalarOp::ge, x, kb.iconst(1))) == 1);
  CHECK(truth(kb.binary(kir::ScalarOp::le, x, kb.iconst(30))) == 1);
  CHECK(truth(kb.binary(kir::ScalarOp::lt, x, kb.iconst(31))) == 1);
  CHECK(truth(kb.binary(kir::ScalarOp::gt, x, kb.iconst(0))) == 1);
  CHECK(truth(kb.binary(kir::ScalarOp::lt, x, kb.iconst(1))) == 0);
  CHECK(truth(kb.binary(kir::ScalarOp::eq, x, kb.iconst(31))) == 0);
  CHECK(truth(kb.binary(kir::ScalarOp::ne, x, kb.iconst(0))) == 1);
  // Undecided where the ranges overlap.
  CHECK(truth(kb.binary(kir::ScalarOp::ge, x, kb.iconst(2))) == -1);
  CHECK(truth(kb.binary(kir::ScalarOp::le, x, row)) == -1);
  // Sums, differences, products and quotients carry their bounds.
  const kir::ValueId d = kb.binary(kir::ScalarOp::sub, x, row);  // [-2, 30]
  CHECK(truth(kb.binary(kir::ScalarOp::ge, d, kb.iconst(-2))) == 1);
  CHECK(truth(kb.binary(kir::ScalarOp::ge, d, kb.iconst(-1))) == -1);
  CHECK(truth(kb.binary(kir::ScalarOp::lt, kb.binary(kir::ScalarOp::mul, row, kb.iconst(8)),
                        kb.iconst(25))) == 1);
  CHECK(truth(kb.binary(kir::ScalarOp::le, kb.binary(kir::ScalarOp::idiv, x, kb.iconst(8)),
                        kb.iconst(3))) == 1);
  // (x + 1) - 1 is x again; min and max that the ranges decide are one operand.
  CHECK(kb.binary(kir::ScalarOp::sub, x, kb.iconst(1)) == kb.index(l));
  CHECK(kb.binary(kir::ScalarOp::max, x, kb.iconst(0)) == x);
  CHECK(kb.binary(kir::ScalarOp::min, x, kb.iconst(40)) == x);
  kb.end_loop();
  kir::verify_kernel(kb.take());
}

TEST_CASE("the builder takes x*k + y apart by k and by multiples of k") {
  kir::KernelBuilder kb("t");
  using kir::ScalarOp;
  const kir::ValueId row = kb.index(0);
  const int32_t l = kb.begin_loop(28);
  const kir::ValueId j = kb.index(l);
  const kir::ValueId lin =
      kb.binary(ScalarOp::add, kb.binary(ScalarOp::mul, row, kb.iconst(28)), j);
  CHECK(kb.binary(ScalarOp::imod, lin, kb.iconst(28)) == j);
  CHECK(kb.binary(ScalarOp::idiv, lin, kb.iconst(28)) == row);
  // By 784 = 28 * 28: the quotient is the row's, the remainder (row % 28) * 28 + j.
  const kir::ValueId q = kb.binary(ScalarOp::idiv, lin, kb.iconst(784));
  CHECK(q == kb.binary(ScalarOp::idiv, row, kb.iconst(28)));
  const kir::ValueId r = kb.binary(ScalarOp::imod, lin, kb.iconst(784));
  CHECK(r == kb.binary(ScalarOp::add,
                       kb.binary(ScalarOp::mul, kb.binary(ScalarOp::imod, row, kb.iconst(28)),
                                 kb.iconst(28)),
                       j));
  // Not a multiple: no fold.
  CHECK(kb.def(kb.binary(ScalarOp::idiv, lin, kb.iconst(30))).op == ScalarOp::idiv);
  kb.end_loop();
}

TEST_CASE("the builder takes x*k + y apart by a divisor of k") {
  // A [25088, 75] transpose of patches [32, 75, 784] (a conv's weight gradient):
  // the source index j*25088 + row divides by 784 as j*32 + row/784, once per row.
  kir::KernelBuilder kb("t");
  using kir::ScalarOp;
  const kir::ValueId row = kb.index(0);
  kb.set_upper_bound(row, 25088);
  const int32_t l = kb.begin_loop(75);
  const kir::ValueId j = kb.index(l);
  const kir::ValueId lin =
      kb.binary(ScalarOp::add, kb.binary(ScalarOp::mul, j, kb.iconst(25088)), row);
  CHECK(kb.binary(ScalarOp::imod, lin, kb.iconst(784)) ==
        kb.binary(ScalarOp::imod, row, kb.iconst(784)));
  CHECK(kb.binary(ScalarOp::idiv, lin, kb.iconst(784)) ==
        kb.binary(ScalarOp::add, kb.binary(ScalarOp::mul, j, kb.iconst(32)),
                  kb.binary(ScalarOp::idiv, row, kb.iconst(784))));
  // A dividend of unknown sign is left alone (truncation is not floor below 0).
  kir::KernelBuilder kb2("u");
  const kir::ValueId x = kb2.index(0), y = kb2.index(kb2.begin_loop(8));
  const kir::ValueId sum =
      kb2.binary(ScalarOp::add, kb2.binary(ScalarOp::mul, x, kb2.iconst(64)), y);
  CHECK(kb2.def(kb2.binary(ScalarOp::idiv, sum, kb2.iconst(8))).op == ScalarOp::idiv);
  kb2.end_loop();
  kb.end_loop();
}

namespace {
// A float buffer of n elements for a kernel built by hand.
int32_t f32_buffer(kir::KernelBuilder& kb, int64_t n) {
  kir::Buffer in;
  in.dtype = DType::f32;
  in.shape = {n};
  return kb.add_buffer(in);
}
}  // namespace

TEST_CASE("the builder selects an index rather than a loaded value, and keeps it contiguous") {
  using kir::ScalarOp;
  kir::KernelBuilder kb("t");
  const int32_t b0 = f32_buffer(kb, 64);
  const kir::ValueId row = kb.index(0);
  const kir::ValueId c = kb.binary(ScalarOp::lt, row, kb.iconst(2));
  const kir::ValueId j = kb.index(kb.begin_loop(16));
  const kir::ValueId a = kb.binary(ScalarOp::add, j, kb.iconst(3));
  const kir::ValueId b = kb.binary(ScalarOp::add, kb.binary(ScalarOp::add, j, row), kb.iconst(7));
  const kir::ValueId v = kb.select(c, kb.load(b0, a), kb.load(b0, b));
  // One load at j + select(c, 3, row + 7).
  REQUIRE(kb.def(v).op == ScalarOp::load);
  const kir::ValueDef& idx = kb.def(kb.def(v).args[0]);
  CHECK(idx.op == ScalarOp::add);
  CHECK((idx.args[0] == j || idx.args[1] == j));
  const kir::ValueId chosen = idx.args[0] == j ? idx.args[1] : idx.args[0];
  CHECK(kb.def(chosen).op == ScalarOp::select);
  CHECK(kb.def(chosen).args[1] == kb.iconst(3));
  kb.end_loop();
}

TEST_CASE("the builder keeps reads behind masks one read behind one mask") {
  using kir::ScalarOp;
  kir::KernelBuilder kb("t");
  const int32_t b0 = f32_buffer(kb, 64);
  const kir::ValueId row = kb.index(0);
  const kir::ValueId zero = kb.constant(DType::f32, 0);
  const kir::ValueId m = kb.binary(ScalarOp::lt, row, kb.iconst(5));
  const kir::ValueId n = kb.binary(ScalarOp::gt, row, kb.iconst(1));
  const kir::ValueId c = kb.binary(ScalarOp::lt, row, kb.iconst(3));
  const kir::ValueId i = kb.binary(ScalarOp::add, row, kb.iconst(2));
  const kir::ValueId j = kb.binary(ScalarOp::add, row, kb.iconst(9));
  // A pad's read masked again (a pad of a pad): one select, both masks.
  const kir::ValueId twice = kb.select(c, kb.select(m, kb.load(b0, i), zero), zero);
  REQUIRE(kb.def(twice).op == ScalarOp::select);
  CHECK(kb.def(twice).args[0] == kb.binary(ScalarOp::and_, c, m));
  CHECK(kb.def(kb.def(twice).args[1]).op == ScalarOp::load);
  // Two taps chosen between (a stack of pads' reads): one load at the chosen
  // index, behind the chosen mask.
  const kir::ValueId v =
      kb.select(c, kb.select(m, kb.load(b0, i), zero), kb.select(n, kb.load(b0, j), zero));
  REQUIRE(kb.def(v).op == ScalarOp::select);
  CHECK(kb.def(v).args[2] == zero);
  const kir::ValueDef& load = kb.def(kb.def(v).args[1]);
  REQUIRE(load.op == ScalarOp::load);
  CHECK((load.args[0] != i && load.args[0] != j));  // row + select(c, 2, 9)
  const kir::ValueDef& mask = kb.def(kb.def(v).args[0]);
  REQUIRE(mask.op == ScalarOp::select);
  CHECK(mask.args[0] == c);
  CHECK(mask.args[1] == m);
  CHECK(mask.args[2] == n);
  // Masks filling with different values are not merged.
  const kir::ValueId one = kb.constant(DType::f32, 1);
  const kir::ValueId mixed =
      kb.select(c, kb.select(m, kb.load(b0, i), zero), kb.select(n, kb.load(b0, j), one));
  CHECK(kb.def(kb.def(mixed).args[1]).op == ScalarOp::select);
}

TEST_CASE("the verifier rejects values used out of scope and type errors") {
  kir::KernelBuilder kb("bad");
  kir::Buffer in;
  in.dtype = DType::f32;
  in.shape = {4};
  const int32_t b0 = kb.add_buffer(in);
  kir::Buffer out = in;
  out.output = true;
  const int32_t b1 = kb.add_buffer(out);
  const int32_t l = kb.begin_loop(4);
  const kir::ValueId x = kb.load(b0, kb.index(l));
  kb.end_loop();
  kb.store(b1, kb.index(0), x);  // x is out of scope here
  kir::Kernel k = kb.take();
  CHECK_THROWS_WITH_AS(kir::verify_kernel(k), doctest::Contains("outside the block"), Error);

  kir::Kernel k2;
  k2.name = "types";
  k2.buffers = {in};
  kir::ValueDef idx;
  idx.op = kir::ScalarOp::index;
  idx.type = DType::i64;
  idx.ref = 0;
  k2.values.push_back(idx);
  kir::ValueDef ld;
  ld.op = kir::ScalarOp::load;
  ld.type = DType::f64;  // buffer is f32
  ld.args[0] = 0;
  ld.ref = 0;
  k2.values.push_back(ld);
  k2.body.push_back(kir::Stmt{kir::StmtKind::let, 0});
  k2.body.push_back(kir::Stmt{kir::StmtKind::let, 1});
  CHECK_THROWS_WITH_AS(kir::verify_kernel(k2), doctest::Contains("type mismatch"), Error);
}

TEST_CASE("groups that cannot be lowered name the user's source line") {
  Graph g;
  Builder b(g);
  b.loc = SourceLoc("model.cpp", 42);
  const Value r(b.op_multi(OpKind::custom, {b.arg(0, ty(DType::f32, {4}))},
                           Attrs{{AttrKey::fn, int64_t{1}}}, {ty(DType::f32, {4})}),
                0);
  g.outputs = {b.unary(OpKind::exp, r)};
  FusionGroup grp = make_group(g, GroupKind::Elementwise, all_compute_nodes(g));
  CHECK_THROWS_WITH_AS(compile_cpu_kernel(g, grp, {}), doctest::Contains("model.cpp:42"), Error);
  FusionGroup opaque = make_group(g, GroupKind::Opaque, {r.node});
  CHECK_THROWS_WITH_AS(compile_cpu_kernel(g, opaque, {}), doctest::Contains("opaque"), Error);
}

TEST_CASE("kernel info: name, sources, range, grain, bytes and flops") {
  Graph g;
  Builder b(g);
  b.loc = SourceLoc("/src/net.cpp", 3);
  Value x = b.arg(0, ty(DType::f32, {256, 512}));
  Value y = b.unary(OpKind::exp, x);
  b.loc = SourceLoc("/src/net.cpp", 4);
  Value s = b.sum(y, {1}, false);
  g.outputs = {s};
  CpuKernel k =
      compile_cpu_kernel(g, make_group(g, GroupKind::Reduction, all_compute_nodes(g)), {});
  CHECK(k.info.name == "k1_reduction_exp_sum");
  CHECK(k.info.sources == std::vector<std::string>{"net.cpp:3", "net.cpp:4"});
  CHECK(k.info.range == 256);
  CHECK(k.info.grain == 32);
  CHECK(k.info.bytes_read == 256 * 512 * 4);
  CHECK(k.info.bytes_written == 256 * 4);
  CHECK(k.info.flops == 2 * 256 * 512);
  CHECK(k.info.kind == GroupKind::Reduction);
  CHECK(k.info.nodes == std::vector<NodeId>{1, 2});
}

TEST_CASE("overwritable: an output may overwrite an input read only where it is written") {
  auto allowed = [](std::string_view ir) {
    Graph g = parse_graph(ir);
    FusionGroup grp = make_group(g, GroupKind::Elementwise, all_compute_nodes(g));
    kir::Kernel k = lower_group(g, grp);
    const std::pair<Value, Value> pair{g.outputs[0], Value(1)};
    const auto may = overwritable(grp, k);
    const bool listed = std::find(may.begin(), may.end(), pair) != may.end();
    if (listed) {  // and then it is stored there, every store through the input's buffer
      store_in_place(k, {pair});
      for (const kir::Buffer& b : k.buffers)
        if (b.output) CHECK(k.buffers[size_t(b.alias)].value == Value(1));
    } else {
      CHECK_THROWS_AS(store_in_place(k, {pair}), Error);
    }
    return listed;
  };
  // An SGD step: p - 0.1 * grad reads p at the element it writes.
  CHECK(
      allowed("%0 = arg {index=0} : f32[4,8]\n"
              "%1 = param {index=0} : f32[4,8]\n"
              "%2 = constant {value=0.1} : f32[4,8]\n"
              "%3 = mul %0, %2 : f32[4,8]\n"
              "%4 = sub %1, %3 : f32[4,8]\n"
              "return %4\n"));
  // p + p^T reads p at other elements too.
  CHECK_FALSE(
      allowed("%0 = arg {index=0} : f32[4,4]\n"
              "%1 = param {index=0} : f32[4,4]\n"
              "%2 = permute %1 {perm=[1, 0]} : f32[4,4]\n"
              "%3 = add %1, %2 : f32[4,4]\n"
              "%4 = add %3, %0 : f32[4,4]\n"
              "return %4\n"));
  // A different dtype cannot share the buffer.
  CHECK_FALSE(
      allowed("%0 = arg {index=0} : f64[8]\n"
              "%1 = param {index=0} : f32[8]\n"
              "%2 = cast %1 {dtype=f64} : f64[8]\n"
              "%3 = add %2, %0 : f64[8]\n"
              "return %3\n"));
}
