// simplify: every pattern of the table, applied and (where unsound or
// type-changing) refused, as IR text in and expected IR text out. Each case
// also runs both graphs in the interpreter on random inputs.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/dce.h"
#include "passes/simplify.h"

using namespace kiln;
using passtest::ir;

namespace {

// Simplifies, verifies, checks the results did not change, and drops the nodes
// the rewrites left unused.
std::string simplified(const char* text) {
  Graph g = ir(text);
  Graph out = simplify(g);
  verify(out);
  passtest::check_same_results(g, out);
  return print_graph(dce(out));
}

// The text unchanged (after dce, as simplified() prints).
std::string unchanged(const char* text) {
  return print_graph(dce(ir(text)));
}

}  // namespace

TEST_CASE("simplify: x*1, 1*x, x+0, 0+x, x-0, x/1 -> x") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[2,3]
    %one = constant {value=1.0} : f32[]
    %zero = constant {value=0.0} : f32[]
    %ones = constant {value=1} : f32[2,3]
    %a = mul %x, %one
    %b = mul %one, %a
    %c = add %b, %zero
    %d = add %zero, %c
    %e = sub %d, %zero
    %f = div %e, %one
    %g = mul %f, %ones
    %h = exp %g
    return %h
  )") == "%0 = arg {index=0} : f32[2,3]\n"
         "%1 = exp %0 : f32[2,3]\n"
         "return %1\n");
  CHECK(simplified(R"(
    %i = arg {index=0} : i32[4]
    %one = constant {value=1} : i32[]
    %zero = constant {value=0} : i64[]
    %a = mul %i, %one
    %b = add %zero, %a
    %c = neg %b
    return %c
  )") == "%0 = arg {index=0} : i32[4]\n"
         "%1 = constant {value=0} : i64[]\n"
         "%2 = add %1, %0 : i64[4]\n"
         "%3 = neg %2 : i64[4]\n"
         "return %3\n");
}

TEST_CASE("simplify refuses identities that would change the result type") {
  const char* text = R"(
    %x = arg {index=0} : f32[3]
    %i = arg {index=1} : i32[3]
    %one = constant {value=1.0} : f32[]
    %zero = constant {value=0.0} : f32[]
    %wide_zero = constant {value=0.0} : f32[2,3]
    %wide_one = constant {value=1.0} : f32[4,1]
    %d_one = constant {value=1.0} : f64[]
    %a = add %x, %wide_zero
    %b = mul %wide_one, %x
    %c = mul %i, %one
    %d = div %i, %one
    %e = mul %x, %d_one
    %f = sub %zero, %x
    %g = div %one, %x
    return %a, %b, %c, %d, %e, %f, %g
  )";
  CHECK(simplified(text) == unchanged(text));
}

TEST_CASE("simplify: x*0 -> 0 for integers only (inf*0 and nan*0 are nan)") {
  CHECK(simplified(R"(
    %i = arg {index=0} : i32[2,3]
    %zero = constant {value=0} : i32[]
    %a = mul %i, %zero
    %b = mul %zero, %i
    %c = add %a, %b
    return %c
  )") == "%0 = arg {index=0} : i32[2,3]\n"
         "%1 = constant {value=0.0} : i32[2,3]\n"
         "return %1\n");
  const char* floats = R"(
    %x = arg {index=0} : f32[2,3]
    %zero = constant {value=0.0} : f32[]
    %a = mul %x, %zero
    %i = arg {index=1} : i32[2,3]
    %b = mul %i, %zero
    return %a, %b
  )";
  CHECK(simplified(floats) == unchanged(floats));
}

TEST_CASE("simplify: sub(x, x) -> 0 for integers only") {
  CHECK(simplified(R"(
    %i = arg {index=0} : i64[5]
    %a = sub %i, %i
    return %a
  )") == "%0 = arg {index=0} : i64[5]\n"
         "%1 = constant {value=0.0} : i64[5]\n"
         "return %1\n");
  const char* floats = R"(
    %x = arg {index=0} : f32[5]
    %a = sub %x, %x
    return %a
  )";
  CHECK(simplified(floats) == unchanged(floats));
}

TEST_CASE("simplify: neg(neg x) -> x") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[3]
    %a = neg %x
    %b = neg %a
    %c = neg %b
    %d = neg %c
    %e = neg %d
    return %b, %e
  )") == "%0 = arg {index=0} : f32[3]\n"
         "%1 = neg %0 : f32[3]\n"
         "return %0, %1\n");
}

TEST_CASE("simplify: reshapes compose, and a reshape to the same shape is the operand") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[2,3,4]
    %a = reshape %x {shape=[6, 4]}
    %b = reshape %a {shape=[24]}
    %c = reshape %b {shape=[4, 6]}
    %d = reshape %x {shape=[2, 12]}
    %e = reshape %d {shape=[2, 3, 4]}
    %f = reshape %x {shape=[2, 3, 4]}
    %g = add %e, %f
    return %c, %g
  )") == "%0 = arg {index=0} : f32[2,3,4]\n"
         "%1 = reshape %0 {shape=[4,6]} : f32[4,6]\n"
         "%2 = add %0, %0 : f32[2,3,4]\n"
         "return %1, %2\n");
}

TEST_CASE("simplify: permutes compose; the identity permute is the operand") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[2,3,4]
    %a = permute %x {perm=[1, 2, 0]}
    %b = permute %a {perm=[1, 0, 2]}
    %c = permute %x {perm=[2, 0, 1]}
    %d = permute %c {perm=[1, 2, 0]}
    %e = permute %x {perm=[0, 1, 2]}
    %f = add %d, %e
    return %b, %f
  )") == "%0 = arg {index=0} : f32[2,3,4]\n"
         "%1 = permute %0 {perm=[2,1,0]} : f32[4,3,2]\n"
         "%2 = add %0, %0 : f32[2,3,4]\n"
         "return %1, %2\n");
}

TEST_CASE("simplify: expand to the same shape; moving a constant gives a constant") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[2,3]
    %a = expand %x {shape=[2, 3]}
    %c = constant {value=0.5} : f32[]
    %ce = expand %c {shape=[2, 3]}
    %b = mul %a, %ce
    %k = constant {value=2.0} : f32[3,1]
    %kr = reshape %k {shape=[1, 3]}
    %kp = permute %k {perm=[1, 0]}
    %ks = slice %k {dim=0, start=1, end=3, step=1}
    %s = add %kr, %kp
    return %b, %s, %ks
  )") == "%0 = arg {index=0} : f32[2,3]\n"
         "%1 = constant {value=0.5} : f32[2,3]\n"
         "%2 = mul %0, %1 : f32[2,3]\n"
         "%3 = constant {value=2.0} : f32[1,3]\n"
         "%4 = constant {value=2.0} : f32[2,1]\n"
         "%5 = add %3, %3 : f32[1,3]\n"
         "return %2, %5, %4\n");
  const char* kept = R"(
    %x = arg {index=0} : f32[1,3]
    %a = expand %x {shape=[2, 3]}
    %l = literal {data=[1.0, 2.0]} : f32[2,1]
    %b = expand %l {shape=[2, 3]}
    %c = add %a, %b
    return %c
  )";
  CHECK(simplified(kept) == unchanged(kept));
}

TEST_CASE("simplify: cast to the same dtype is the operand") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[3]
    %a = cast %x {dtype=f32}
    %b = cast %a {dtype=f64}
    return %b
  )") == "%0 = arg {index=0} : f32[3]\n"
         "%1 = cast %0 {dtype=f64} : f64[3]\n"
         "return %1\n");
}

TEST_CASE("simplify: a slice of a whole dim with step 1, and an empty pad, are the operand") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[4,3]
    %a = slice %x {dim=1, start=0, end=3, step=1}
    %b = slice %a {dim=-1, start=0, end=3, step=1}
    %c = pad %b {dim=0, low=0, high=0, interior=0}
    %d = exp %c
    return %d
  )") == "%0 = arg {index=0} : f32[4,3]\n"
         "%1 = exp %0 : f32[4,3]\n"
         "return %1\n");
  const char* kept = R"(
    %x = arg {index=0} : f32[4,3]
    %a = slice %x {dim=0, start=1, end=4, step=1}
    %b = slice %x {dim=0, start=0, end=4, step=2}
    %c = slice %x {dim=1, start=0, end=2, step=1}
    %d = pad %x {dim=0, low=1, high=0, interior=0}
    return %a, %b, %c, %d
  )";
  CHECK(simplified(kept) == unchanged(kept));
}

TEST_CASE("simplify: pow(x, 2) -> x*x and pow(x, 1) -> x when the type is kept") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[3]
    %two = constant {value=2.0} : f32[]
    %one = constant {value=1.0} : f32[]
    %a = pow %x, %two
    %b = pow %a, %one
    return %b
  )") == "%0 = arg {index=0} : f32[3]\n"
         "%1 = mul %0, %0 : f32[3]\n"
         "return %1\n");
  const char* kept = R"(
    %x = arg {index=0} : f32[3]
    %i = arg {index=1} : i32[3]
    %two = constant {value=2.0} : f32[]
    %three = constant {value=3.0} : f32[]
    %wide_two = constant {value=2.0} : f32[2,3]
    %a = pow %i, %two
    %b = pow %x, %three
    %c = pow %x, %wide_two
    %d = pow %two, %x
    return %a, %b, %c, %d
  )";
  CHECK(simplified(kept) == unchanged(kept));
}

TEST_CASE("simplify: where(c, x, x) -> x unless the condition broadcasts it") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[3]
    %c = arg {index=1} : bool[3]
    %a = where %c, %x, %x
    return %a
  )") == "%0 = arg {index=0} : f32[3]\n"
         "%1 = arg {index=1} : bool[3]\n"
         "return %0\n");
  const char* kept = R"(
    %x = arg {index=0} : f32[3]
    %y = arg {index=1} : f32[3]
    %c = arg {index=2} : bool[2,3]
    %a = where %c, %x, %x
    %b = where %c, %x, %y
    return %a, %b
  )";
  CHECK(simplified(kept) == unchanged(kept));
}

TEST_CASE("simplify runs to a fixed point across patterns, keeping locations") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[2,3]
    %one = constant {value=1.0} : f32[]  @ m.cpp:1
    %a = mul %x, %one  @ m.cpp:2
    %b = permute %a {perm=[1, 0]}  @ m.cpp:3
    %c = neg %b  @ m.cpp:4
    %d = permute %c {perm=[1, 0]}  @ m.cpp:5
    %e = neg %d  @ m.cpp:6
    %f = reshape %e {shape=[6]}  @ m.cpp:7
    %two = constant {value=2.0} : f32[]  @ m.cpp:8
    %g = pow %f, %two  @ m.cpp:9
    %h = reshape %g {shape=[3, 2]}  @ m.cpp:10
    return %h
  )");
  Graph out = simplify(g);
  verify(out);
  passtest::check_same_results(g, out);
  CHECK(print_graph(dce(out), PrintOptions{true}) ==
        "%0 = arg {index=0} : f32[2,3]\n"
        "%1 = permute %0 {perm=[1,0]} : f32[3,2]  @ m.cpp:3\n"
        "%2 = neg %1 : f32[3,2]  @ m.cpp:4\n"
        "%3 = permute %2 {perm=[1,0]} : f32[2,3]  @ m.cpp:5\n"
        "%4 = neg %3 : f32[2,3]  @ m.cpp:6\n"
        "%5 = reshape %4 {shape=[6]} : f32[6]  @ m.cpp:7\n"
        "%6 = mul %5, %5 : f32[6]  @ m.cpp:9\n"
        "%7 = reshape %6 {shape=[3,2]} : f32[3,2]  @ m.cpp:10\n"
        "return %7\n");
  // A second run finds nothing more to do.
  CHECK(print_graph(simplify(out)) == print_graph(out));
}

TEST_CASE("simplify: (a @ b)^T -> b^T @ a^T, transposes composing away") {
  CHECK(simplified("%0 = arg {index=0} : f32[4,3]\n"
                   "%1 = arg {index=1} : f32[5,3]\n"
                   "%2 = permute %1 {perm=[1,0]} : f32[3,5]\n"
                   "%3 = matmul %0, %2 : f32[4,5]\n"
                   "%4 = permute %3 {perm=[1,0]} : f32[5,4]\n"
                   "return %4\n") ==
        "%0 = arg {index=0} : f32[4,3]\n"
        "%1 = arg {index=1} : f32[5,3]\n"
        "%2 = permute %0 {perm=[1,0]} : f32[3,4]\n"
        "%3 = matmul %1, %2 : f32[5,4]\n"
        "return %3\n");
  // Not when the product is used elsewhere (that would compute it twice).
  CHECK(simplified("%0 = arg {index=0} : f32[4,3]\n"
                   "%1 = arg {index=1} : f32[3,5]\n"
                   "%2 = matmul %0, %1 : f32[4,5]\n"
                   "%3 = permute %2 {perm=[1,0]} : f32[5,4]\n"
                   "return %3, %2\n") ==
        "%0 = arg {index=0} : f32[4,3]\n"
        "%1 = arg {index=1} : f32[3,5]\n"
        "%2 = matmul %0, %1 : f32[4,5]\n"
        "%3 = permute %2 {perm=[1,0]} : f32[5,4]\n"
        "return %3, %2\n");
}

TEST_CASE("simplify: x + scatter_add(0, i, s) -> scatter_add(x, i, s), in either order") {
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[4,3]
    %s = arg {index=1} : f32[2,3]
    %i = literal {data=[3, 0, 3, 3, 1, 0]} : i64[2,3]
    %zero = constant {value=0.0} : f32[4,3]
    %j = literal {data=[2, 0, 2, 1, 1, 0]} : i64[2,3]
    %t = scatter_add %zero, %i, %s {dim=0}
    %a = add %x, %t
    %u = scatter_add %zero, %j, %s {dim=1}
    %b = add %u, %a
    return %b
  )") == "%0 = arg {index=0} : f32[4,3]\n"
         "%1 = arg {index=1} : f32[2,3]\n"
         "%2 = literal {data=[3,0,3,3,1,0]} : i64[2,3]\n"
         "%3 = literal {data=[2,0,2,1,1,0]} : i64[2,3]\n"
         "%4 = scatter_add %0, %2, %1 {dim=0} : f32[4,3]\n"
         "%5 = scatter_add %4, %3, %1 {dim=1} : f32[4,3]\n"
         "return %5\n");
  // A scatter_add into anything but zeros, or used twice, stays.
  CHECK(simplified(R"(
    %x = arg {index=0} : f32[4,3]
    %s = arg {index=1} : f32[2,3]
    %i = literal {data=[3, 0, 3, 3, 1, 0]} : i64[2,3]
    %t = scatter_add %x, %i, %s {dim=0}
    %a = add %x, %t
    return %a
  )") == unchanged(R"(
    %x = arg {index=0} : f32[4,3]
    %s = arg {index=1} : f32[2,3]
    %i = literal {data=[3, 0, 3, 3, 1, 0]} : i64[2,3]
    %t = scatter_add %x, %i, %s {dim=0}
    %a = add %x, %t
    return %a
  )"));
}

TEST_CASE("simplify: a cross-entropy's backward sums no scattered one-hot, and adds it in place") {
  // The gradient of log_softmax's input: g - softmax * sum(g), g the one-hot
  // scatter of the loss's gradient. The row sums of g are the scattered values
  // (sum_scatter, through the neg), which leaves the scatter one use, and
  // add_scatter writes it into the softmax term: no zero table, no full pass.
  CHECK(simplified(R"(
    %sm = arg {index=0} : f32[4,5]
    %s = arg {index=1} : f32[4,1]
    %i = literal {data=[3, 0, 4, 1]} : i64[4,1]
    %zero = constant {value=0.0} : f32[4,5]
    %g = scatter_add %zero, %i, %s {dim=1}
    %n = neg %g
    %r = sum %n {dims=[1], keepdim=1}
    %e = expand %r {shape=[4,5]}
    %m = mul %e, %sm
    %out = add %g, %m
    return %out
  )") == "%0 = arg {index=0} : f32[4,5]\n"
         "%1 = arg {index=1} : f32[4,1]\n"
         "%2 = literal {data=[3,0,4,1]} : i64[4,1]\n"
         "%3 = neg %1 : f32[4,1]\n"
         "%4 = sum %3 {dims=[1], keepdim=1} : f32[4,1]\n"
         "%5 = expand %4 {shape=[4,5]} : f32[4,5]\n"
         "%6 = mul %5, %0 : f32[4,5]\n"
         "%7 = scatter_add %6, %2, %1 {dim=1} : f32[4,5]\n"
         "return %7\n");
  // Two sources to a line, a line with none, a sum over another dim, or a base
  // that is not zeros: the sum stays.
  for (const char* text : {
           "%0 = arg {index=0} : f32[4,2]\n%1 = literal {data=[0,1,2,3,4,0,1,2]} : i64[4,2]\n"
           "%2 = constant {value=0.0} : f32[4,5]\n%3 = scatter_add %2, %1, %0 {dim=1} : f32[4,5]\n"
           "%4 = sum %3 {dims=[1], keepdim=0} : f32[4]\nreturn %4\n",
           "%0 = arg {index=0} : f32[3,1]\n%1 = literal {data=[0,1,2]} : i64[3,1]\n"
           "%2 = constant {value=0.0} : f32[4,5]\n%3 = scatter_add %2, %1, %0 {dim=1} : f32[4,5]\n"
           "%4 = sum %3 {dims=[1], keepdim=0} : f32[4]\nreturn %4\n",
           "%0 = arg {index=0} : f32[4,1]\n%1 = literal {data=[0,1,2,3]} : i64[4,1]\n"
           "%2 = constant {value=0.0} : f32[4,5]\n%3 = scatter_add %2, %1, %0 {dim=1} : f32[4,5]\n"
           "%4 = sum %3 {dims=[0], keepdim=0} : f32[5]\nreturn %4\n",
           "%0 = arg {index=0} : f32[4,1]\n%1 = literal {data=[0,1,2,3]} : i64[4,1]\n"
           "%2 = constant {value=1.0} : f32[4,5]\n%3 = scatter_add %2, %1, %0 {dim=1} : f32[4,5]\n"
           "%4 = sum %3 {dims=[1], keepdim=0} : f32[4]\nreturn %4\n",
       }) {
    CAPTURE(text);
    CHECK(simplified(text) == unchanged(text));
  }
}
