// dce: IR text in, expected IR text out.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/dce.h"

using namespace kiln;
using passtest::ir;
using passtest::run_on;

TEST_CASE("dce drops what no output or update reads, and renumbers densely") {
  const char* in = R"(
    %x = arg {index=0} : f32[4]
    %unused = arg {index=1} : f32[4]
    %w = param {index=0} : f32[4]
    %dead1 = exp %x
    %dead2 = mul %dead1, %dead1
    %a = add %x, %w
    %c = constant {value=0.5} : f32[]
    %dead3 = mul %a, %c
    %b = neg %a
    %step = sub %w, %c
    return %b
    update 0 = %step
  )";
  CHECK(run_on(dce, in) ==
        "%0 = arg {index=0} : f32[4]\n"
        "%1 = arg {index=1} : f32[4]\n"
        "%2 = param {index=0} : f32[4]\n"
        "%3 = add %0, %2 : f32[4]\n"
        "%4 = constant {value=0.5} : f32[]\n"
        "%5 = neg %3 : f32[4]\n"
        "%6 = sub %2, %4 : f32[4]\n"
        "return %5\n"
        "update 0 = %6\n");
}

TEST_CASE("dce keeps multi-result nodes one of whose results is used, and their locations") {
  const char* in = R"(
    %x = arg {index=0} : f32[3]
    %d = exp %x  @ model.cpp:3
    %a, %b = custom %x {fn=1} : f32[3], f32[3]  @ model.cpp:4
    %r = add %b, %x  @ model.cpp:5
    return %r, %r
  )";
  Graph out = dce(ir(in));
  CHECK(print_graph(out, PrintOptions{true}) ==
        "%0 = arg {index=0} : f32[3]\n"
        "%1, %2 = custom %0 {fn=1} : f32[3], f32[3]  @ model.cpp:4\n"
        "%3 = add %2, %0 : f32[3]  @ model.cpp:5\n"
        "return %3, %3\n");
}

TEST_CASE("dce of a graph without dead code is the same graph") {
  const char* in =
      "%0 = arg {index=0} : f32[2,3]\n"
      "%1 = sum %0 {dims=[1], keepdim=0} : f32[2]\n"
      "return %1\n";
  CHECK(run_on(dce, in) == in);
  CHECK(print_graph(dce(Graph{})) == "return\n");
}
