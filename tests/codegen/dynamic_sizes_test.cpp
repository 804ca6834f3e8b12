// Dynamic dimensions (codegen/dynamic_sizes.h): which sizes a call changed,
// which dimensions are dynamic, the marks checked against a call, the probe's
// types, and the backend capabilities they rest on.
#include <doctest/doctest.h>

#include "codegen/backend.h"
#include "codegen/dynamic_sizes.h"

using namespace kiln;

namespace {

TensorType f32(Shape s, Device d = Device(kCPU)) {
  return TensorType{DType::f32, std::move(s), d};
}

}  // namespace

TEST_CASE("size_changes finds the dimensions whose sizes alone changed") {
  // Parameters: a number, then two tensors.
  const std::vector<bool> is_tensor{false, true, true};
  const std::vector<TensorType> was{f32({8, 3}), f32({3})};
  const std::vector<TensorType> now{f32({5, 3}), f32({3})};
  const std::vector<double> nums{2.0};
  const auto found = size_changes({is_tensor, now, nums}, was, nums);
  REQUIRE(found);
  REQUIRE(found->size() == 1);
  CHECK(found->front().arg == 1);
  CHECK(found->front().tensor == 0);
  CHECK(found->front().dim == 0);
  CHECK_FALSE(found->front().marked);
  // Another number, dtype or rank is no size change.
  CHECK_FALSE(size_changes({is_tensor, now, std::vector<double>{3.0}}, was, nums));
  const std::vector<TensorType> f64{TensorType{DType::f64, {5, 3}, {}}, f32({3})};
  CHECK_FALSE(size_changes({is_tensor, f64, nums}, was, nums));
  const std::vector<TensorType> rank{f32({5, 3, 1}), f32({3})};
  CHECK_FALSE(size_changes({is_tensor, rank, nums}, was, nums));
  CHECK(size_changes({is_tensor, was, nums}, was, nums)->empty());
}

TEST_CASE("DynamicDims: marks, changes made dynamic once, negative dims, the probe taken once") {
  DynamicDims dims;
  CHECK(dims.empty());
  const std::vector<bool> is_tensor{true, true};
  // Only a tensor's position among the parameters can be marked.
  CHECK_THROWS_WITH_AS(dims.mark(2, 0, is_tensor, "'f'"),
                       "mark_dynamic(arg 2, dim 0) on 'f': expected the position of a tensor "
                       "argument (the function takes 2 arguments)",
                       Error);
  CHECK_THROWS_AS(dims.mark(0, 0, {false, true}, "'f'"), Error);
  CHECK(dims.empty());
  const std::vector<TensorType> types{f32({8, 3}), f32({4, 6})};
  CHECK(dims.mark(1, -1, is_tensor, "'f'"));
  CHECK_FALSE(dims.mark(1, -1, is_tensor, "'f'"));  // already dynamic
  dims.fit_marked(is_tensor, types, "traced function 'f'", SourceLoc());
  // A change of arg 1 dim 1 is the marked -1; arg 0 dim 0 is new.
  const std::vector<DynamicDim> changes{{0, 0, 0, false}, {1, 1, 1, false}};
  CHECK_FALSE(dims.all_dynamic(changes, types));
  const std::vector<DynamicDim> added = dims.add(changes, types);
  REQUIRE(added.size() == 1);
  CHECK(added.front().arg == 0);
  CHECK(dims.all_dynamic(changes, types));
  CHECK(dims.add(changes, types).empty());
  const std::vector<DynamicDim> probe = dims.take_probe();
  REQUIRE(probe.size() == 1);
  CHECK(probe.front().tensor == 1);  // set by fit_marked
  CHECK(dims.take_probe().empty());
}

TEST_CASE("a dimension made dynamic, as the log names it") {
  // Parameters: a number, then two tensors; the second tensor's dim 1 changed.
  const DynamicDim d{2, 1, 1, false};
  CHECK(d.str() == "arg 2 dim 1");
  CHECK(now_dynamic_str(d, {f32({8, 3}), f32({4, 64})}, {f32({8, 3}), f32({4, 32})}) ==
        "arg 2 dim 1 is now dynamic (64 -> 32): CPU kernels take it at run time; a new size "
        "retraces and shares them");
}

TEST_CASE("a marked dimension that does not fit the call is an error naming it") {
  DynamicDims dims;
  const std::vector<bool> is_tensor{true};
  dims.mark(0, 2, is_tensor, "'f'");
  CHECK_THROWS_WITH_AS(
      dims.fit_marked(is_tensor, {f32({3})}, "traced function 'f'", SourceLoc()),
      doctest::Contains("traced function 'f': mark_dynamic(arg 0, dim 2) does not fit "
                        "this call (arg 0 is f32[3])"),
      Error);
}

TEST_CASE(
    "the probe's types: each marked dimension one larger, on backends that take sizes at run "
    "time") {
  const std::vector<DynamicDim> dims{{0, 0, 0, true}, {0, 0, -1, true}};
  const auto at = probe_types({f32({8, 3}), f32({2})}, dims);
  REQUIRE(at);
  CHECK(at->at(0).shape == Shape{9, 4});
  CHECK(at->at(1).shape == Shape{2});
  CHECK_FALSE(probe_types({f32({8, 3}, Device(kCUDA, 0))}, {{0, 0, 0, true}}));
}

TEST_CASE(
    "backend capabilities: the CPU takes sizes at run time, compiles off thread, keeps slots") {
  CHECK(cpu_backend().sizes_at_run_time());
  CHECK(cpu_backend().compiles_off_thread());
  CHECK(cpu_backend().keeps_slots());
  CHECK_FALSE(cuda_backend().sizes_at_run_time());
  CHECK_FALSE(cuda_backend().compiles_off_thread());
  CHECK_FALSE(cuda_backend().keeps_slots());
}
