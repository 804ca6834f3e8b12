// fold_constants: IR text in, expected IR text out; results compared with the
// interpreter on the unfolded graph.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/constant_fold.h"
#include "passes/dce.h"

using namespace kiln;
using passtest::ir;

namespace {

// Folds, verifies, drops the operands the fold left unused, and checks the
// folded graph computes what the original did.
std::string folded(const char* text) {
  Graph g = ir(text);
  Graph out = fold_constants(g);
  verify(out);
  passtest::check_same_results(g, out);
  return print_graph(dce(out));
}

}  // namespace

TEST_CASE("fold: scalar arithmetic on constants becomes a constant") {
  CHECK(folded(R"(
    %x = arg {index=0} : f32[3]
    %a = constant {value=2.0} : f32[]
    %b = constant {value=3.0} : f32[]
    %s = add %a, %b
    %m = mul %s, %s
    %e = exp %a
    %y = mul %x, %m
    %z = add %y, %e
    return %z
  )") == "%0 = arg {index=0} : f32[3]\n"
         "%1 = constant {value=25.0} : f32[]\n"
         "%2 = constant {value=7.389056205749512} : f32[]\n"
         "%3 = mul %0, %1 : f32[3]\n"
         "%4 = add %3, %2 : f32[3]\n"
         "return %4\n");
}

TEST_CASE("fold: mixed literals and constants give a literal, equal elements a constant") {
  CHECK(folded(R"(
    %l = literal {data=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]} : f32[2,3]
    %c = constant {value=10.0} : f32[3]
    %a = add %l, %c
    %s = sum %l {dims=[1], keepdim=0}
    %t = permute %l {perm=[1, 0]}
    %eq = sub %l, %l
    %i = literal {data=[5, -7]} : i64[2]
    %d = div %i, %i
    return %a, %s, %t, %eq, %d
  )") == "%0 = literal {data=[11.0,12.0,13.0,14.0,15.0,16.0]} : f32[2,3]\n"
         "%1 = literal {data=[6.0,15.0]} : f32[2]\n"
         "%2 = literal {data=[1.0,4.0,2.0,5.0,3.0,6.0]} : f32[3,2]\n"
         "%3 = constant {value=0.0} : f32[2,3]\n"
         "%4 = constant {value=1.0} : f32[2]\n"
         "return %0, %1, %2, %3, %4\n");
}

TEST_CASE("fold: integers stay exact, also beyond 2^53") {
  CHECK(folded(R"(
    %a = constant {value=9007199254740993} : i64[]
    %b = constant {value=2} : i64[]
    %c = add %a, %b
    %l = literal {data=[9007199254740993, 1]} : i64[2]
    %d = mul %l, %b
    %n = literal {data=[3, 4]} : i32[2]
    %cmp = lt %n, %b
    return %c, %d, %cmp
  )") == "%0 = constant {value=9007199254740995} : i64[]\n"
         "%1 = literal {data=[18014398509481986,2]} : i64[2]\n"
         "%2 = constant {value=0.0} : bool[2]\n"
         "return %0, %1, %2\n");
}

TEST_CASE("fold: uniform results of any size become constants; large non-uniform ones stay") {
  std::string fits;
  for (int i = 0; i < 4096; ++i) fits += std::string(i ? "," : "") + (i < 2048 ? "2.0" : "3.0");
  CHECK(folded(R"(
    %c = constant {value=3.0} : f32[100,100]
    %e = expand %c {shape=[4, 100, 100]}
    %n = neg %e
    %s = sum %c {dims=[0], keepdim=0}
    %l = literal {data=[1.0, 2.0]} : f32[2,1]
    %wide = constant {value=3.0} : f32[1,3000]
    %big = add %l, %wide
    %small = constant {value=1.0} : f32[2,2048]
    %fits = add %l, %small
    return %n, %s, %big, %fits
  )") == "%0 = constant {value=-3.0} : f32[4,100,100]\n"
         "%1 = constant {value=300.0} : f32[100]\n"
         "%2 = literal {data=[1.0,2.0]} : f32[2,1]\n"
         "%3 = constant {value=3.0} : f32[1,3000]\n"
         "%4 = add %2, %3 : f32[2,3000]\n"
         "%5 = literal {data=[" +
             fits +
             "]} : f32[2,2048]\n"
             "return %0, %1, %4, %5\n");
}

// A random draw is philox(key, offset + arange) of the generator's captured
// key and offset: it reads parameters, so it is never folded.
TEST_CASE("fold leaves inputs, random draws, custom calls and their users alone") {
  const char* in =
      "%0 = arg {index=0} : f32[2]\n"
      "%1 = param {index=0} : i64[]\n"
      "%2 = param {index=1} : i64[]\n"
      "%3 = arange {start=0, step=1} : i64[2]\n"
      "%4 = add %3, %2 : i64[2]\n"
      "%5 = philox %1, %4 : f32[2]\n"
      "%6 = constant {value=1.0} : f32[]\n"
      "%7 = add %5, %6 : f32[2]\n"
      "%8 = custom %6 {fn=7} : f32[2]\n"
      "%9 = mul %8, %6 : f32[2]\n"
      "%10 = add %0, %6 : f32[2]\n"
      "%11 = arange {start=0, step=1} : f32[2]\n"
      "return %7, %9, %10, %11\n";
  Graph out = fold_constants(ir(in));
  CHECK(print_graph(out) == in);
}

TEST_CASE("fold keeps the folded node's location and result type") {
  Graph out = fold_constants(ir(R"(
    %a = constant {value=1.5} : f64[]  @ a.cpp:1
    %b = cast %a {dtype=i32}  @ a.cpp:2
    %c = reshape %a {shape=[1, 1]}  @ a.cpp:3
    %d = matmul %c, %c  @ a.cpp:4
    return %b, %d
  )"));
  verify(out);
  CHECK(print_graph(dce(out), PrintOptions{true}) ==
        "%0 = constant {value=1.0} : i32[]  @ a.cpp:2\n"
        "%1 = constant {value=2.25} : f64[1,1]  @ a.cpp:4\n"
        "return %0, %1\n");
}
