// rebuild_on_device: a value computed from creation ops alone, built again on
// another device (IR text in, the graph with the new nodes out); a value that
// depends on an input cannot move.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/rebuild_on_device.h"

using namespace kiln;
using passtest::ir;

TEST_CASE("rebuild_on_device builds creation ops and what they compute on the device") {
  Graph g = ir(R"(
    %0 = arange {start=0, step=1} : f32[4]
    %1 = constant {value=2} : f32[4]
    %2 = mul %0, %1
    %3 = exp %2
    %x = arg {index=0} : f32[4]
    return %3, %x
  )");
  Builder b(g);
  const Value moved = rebuild_on_device(b, Value(3), Device(kCUDA));
  REQUIRE(moved.valid());
  g.outputs = {moved};
  CHECK(print_graph(g) ==
        "%0 = arange {start=0, step=1} : f32[4]\n"
        "%1 = constant {value=2} : f32[4]\n"
        "%2 = mul %0, %1 : f32[4]\n"
        "%3 = exp %2 : f32[4]\n"
        "%4 = arg {index=0} : f32[4]\n"
        "%5 = arange {start=0, step=1} : cuda:f32[4]\n"
        "%6 = constant {value=2} : cuda:f32[4]\n"
        "%7 = mul %5, %6 : cuda:f32[4]\n"
        "%8 = exp %7 : cuda:f32[4]\n"
        "return %8\n");
}

TEST_CASE("rebuild_on_device gives an invalid value for one computed from an input") {
  Graph g = ir(R"(
    %0 = arange {start=0, step=1} : f32[4]
    %x = arg {index=0} : f32[4]
    %2 = add %0, %x
    %3 = neg %2
    return %3
  )");
  Builder b(g);
  const size_t before = g.size();
  CHECK_FALSE(rebuild_on_device(b, Value(3), Device(kCUDA)).valid());
  CHECK_FALSE(rebuild_on_device(b, Value(1), Device(kCUDA)).valid());
  CHECK(rebuild_on_device(b, Value(0), Device(kCUDA)).valid());  // the arange alone moves
  CHECK(g.size() <= before + 1);
}
