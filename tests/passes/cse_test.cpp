// cse: IR text in, expected IR text out.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/cse.h"
#include "passes/dce.h"

using namespace kiln;
using passtest::ir;
using passtest::run_on;

TEST_CASE("cse merges identical pure nodes, and what they feed") {
  const char* in = R"(
    %x = arg {index=0} : f32[4]
    %y = arg {index=1} : f32[4]
    %a1 = add %x, %y
    %a2 = add %x, %y
    %e1 = exp %a1
    %e2 = exp %a2
    %c1 = constant {value=2.0} : f32[]
    %c2 = constant {value=2.0} : f32[]
    %m1 = mul %e1, %c1
    %m2 = mul %e2, %c2
    %r = sub %m1, %m2
    return %r
  )";
  CHECK(run_on(cse, in) ==
        "%0 = arg {index=0} : f32[4]\n"
        "%1 = arg {index=1} : f32[4]\n"
        "%2 = add %0, %1 : f32[4]\n"
        "%3 = exp %2 : f32[4]\n"
        "%4 = constant {value=2.0} : f32[]\n"
        "%5 = mul %3, %4 : f32[4]\n"
        "%6 = sub %5, %5 : f32[4]\n"
        "return %6\n");
}

TEST_CASE("cse keeps nodes with identity apart: args, params, custom") {
  const char* in = R"(
    %x = arg {index=0} : f32[4]
    %p = param {index=0} : f32[4]
    %q = param {index=1} : f32[4]
    %c1 = custom %x {fn=1} : f32[4]
    %c2 = custom %x {fn=1} : f32[4]
    %s3 = add %c1, %c2
    %s4 = add %p, %q
    return %s3, %s4
  )";
  std::string out = run_on(cse, in);
  CHECK(out == print_graph(ir(in)));
}

// Two draws are philox at different counters (the generator's offset advanced
// in between): they stay apart. philox is pure, so the same key and counters
// are the same numbers and merge.
TEST_CASE("cse keeps random draws at different counters apart and merges equal ones") {
  const char* apart = R"(
    %key = param {index=0} : i64[]
    %offset = param {index=1} : i64[]
    %i = arange {start=0, step=1} : i64[4]
    %n1 = add %i, %offset
    %four = constant {value=4} : i64[]
    %n2 = add %n1, %four
    %r1 = philox %key, %n1
    %r2 = philox %key, %n2
    %s = add %r1, %r2
    return %s
  )";
  CHECK(run_on(cse, apart) == print_graph(ir(apart)));
  CHECK(run_on(cse, R"(
    %key = param {index=0} : i64[]
    %i = arange {start=0, step=1} : i64[4]
    %r1 = philox %key, %i
    %r2 = philox %key, %i
    %s = add %r1, %r2
    return %s
  )") == "%0 = param {index=0} : i64[]\n"
         "%1 = arange {start=0, step=1} : i64[4]\n"
         "%2 = philox %0, %1 : f32[4]\n"
         "%3 = add %2, %2 : f32[4]\n"
         "return %3\n");
}

TEST_CASE("cse distinguishes attributes, types and operand order") {
  const char* in = R"(
    %x = arg {index=0} : f32[2,3]
    %y = arg {index=1} : f32[2,3]
    %a = sub %x, %y
    %b = sub %y, %x
    %s1 = sum %a {dims=[0], keepdim=0}
    %s2 = sum %a {dims=[0], keepdim=1}
    %c1 = constant {value=1.0} : f32[]
    %c2 = constant {value=1.0} : f64[]
    %c3 = constant {value=1.0} : f32[3]
    %u = add %b, %c1
    %v = add %s1, %c3
    %w = add %s2, %c2
    return %u, %v, %w
  )";
  CHECK(run_on(cse, in) == print_graph(ir(in)));
}

TEST_CASE("cse keeps outputs, updates and locations, and merges into them") {
  const char* in = R"(
    %x = arg {index=0} : f32[4]
    %w = param {index=0} : f32[4]
    %a = mul %x, %w  @ net.cpp:10
    %b = mul %x, %w  @ net.cpp:11
    %c = sub %w, %b  @ net.cpp:12
    return %a, %b
    update 0 = %c
  )";
  Graph out = cse(ir(in));
  verify(out);
  CHECK(print_graph(out, PrintOptions{true}) ==
        "%0 = arg {index=0} : f32[4]\n"
        "%1 = param {index=0} : f32[4]\n"
        "%2 = mul %0, %1 : f32[4]  @ net.cpp:10\n"
        "%3 = sub %1, %2 : f32[4]  @ net.cpp:12\n"
        "return %2, %2\n"
        "update 0 = %3\n");
  passtest::check_same_results(ir(in), out);
}
