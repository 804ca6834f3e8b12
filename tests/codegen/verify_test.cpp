// Plan verification (codegen/verify.h): a plan run kernel by kernel against the
// reference kernels passes when its kernels compute what the graph says, names
// the kernel, value and element that differ when one does not, and allows the
// differences rounding alone makes.
#include <doctest/doctest.h>

#include <cstring>

#include "codegen/verify.h"
#include "ir/parser.h"
#include "runtime/reference.h"

using namespace kiln;

namespace {

constexpr const char* kScaled =
    "%0 = arg {index=0} : f32[5,7]\n"
    "%1 = param {index=0} : f32[7]\n"
    "%2 = constant {value=%s} : f32[]\n"
    "%3 = expand %2 {shape=[5,7]} : f32[5,7]\n"
    "%4 = mul %0, %3 : f32[5,7]\n"
    "%5 = add %4, %1 : f32[5,7]\n"
    "%6 = exp %5 : f32[5,7]\n"
    "%7 = sum %6 {dims=[1], keepdim=0} : f32[5]\n"
    "return %7, %6\n";

Graph scaled(const char* factor) {
  std::string ir = kScaled;
  ir.replace(ir.find("%s"), 2, factor);
  return parse_graph(ir);
}

HostArray filled(const TensorType& t, float start) {
  HostArray a = HostArray::make(t);
  for (int64_t i = 0; i < t.numel(); ++i) a.data<float>()[i] = start + 0.01f * float(i % 13);
  return a;
}

}  // namespace

TEST_CASE("verify_plan passes a plan whose kernels compute the graph") {
  CompileReport r;
  const auto plan = compile_graph(scaled("0.5"), CompileOptions{}, &r);
  const HostArray x = filled(TensorType{DType::f32, {5, 7}, {}}, -0.3f);
  const HostArray w = filled(TensorType{DType::f32, {7}, {}}, 0.1f);
  CHECK_NOTHROW(verify_plan(*plan, r, std::span(&x, 1), std::span(&w, 1), "f"));
}

TEST_CASE("verify_plan names the kernel, value and element a plan computes differently") {
  // The plan of x * 0.5 checked against the report of x * 0.75: its kernel differs.
  CompileReport wrong;
  const auto plan = compile_graph(scaled("0.5"), CompileOptions{}, nullptr);
  (void)compile_graph(scaled("0.75"), CompileOptions{}, &wrong);
  const HostArray x = filled(TensorType{DType::f32, {5, 7}, {}}, -0.3f);
  const HostArray w = filled(TensorType{DType::f32, {7}, {}}, 0.1f);
  std::string message;
  try {
    verify_plan(*plan, wrong, std::span(&x, 1), std::span(&w, 1), "f");
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("KILN_CHECK: kernel k") != std::string::npos);
  CHECK(message.find("of 'f' (from") != std::string::npos);
  CHECK(message.find("differs from the reference kernels: value %") != std::string::npos);
  CHECK(message.find("element 0 is") != std::string::npos);
}

TEST_CASE("first_difference allows the dtype's tolerance and the spread given") {
  float a[3] = {1.0f, 2.0f, 3.0f}, b[3] = {1.0f, 2.00001f, 3.1f};
  const View va = dense_view(a, DType::f32, {3}), vb = dense_view(b, DType::f32, {3});
  double got = 0, want = 0;
  CHECK(first_difference(va, vb, 0, &got, &want) == 2);
  CHECK(got == 3.0);
  CHECK(want == doctest::Approx(3.1));
  CHECK(first_difference(va, vb, 0.2, nullptr, nullptr) == -1);
}

TEST_CASE("step_computing finds the plan step that writes a value") {
  CompileReport r;
  (void)compile_graph(scaled("0.5"), CompileOptions{}, &r);
  const Value out = r.optimized.outputs.front();
  const int64_t k = step_computing(r, out);
  REQUIRE(k >= 0);
  CHECK(std::find(r.step_values[size_t(k)].begin(), r.step_values[size_t(k)].end(), out) !=
        r.step_values[size_t(k)].end());
}

TEST_CASE("value_for finds a plan source's value: an output, or a parameter's update") {
  Graph g = scaled("0.5");
  g.updates.push_back(ParamUpdate{0, g.outputs[1]});
  CHECK(value_for(g, {PlanSource::Output, 0}) == g.outputs[0]);
  CHECK(value_for(g, {PlanSource::Update, 0}) == g.outputs[1]);
  CHECK_FALSE(value_for(g, {PlanSource::Output, 2}).valid());
  CHECK_FALSE(value_for(g, {PlanSource::Update, 1}).valid());
  CHECK_FALSE(value_for(g, {}).valid());
}

TEST_CASE("first_run_difference: definedness, flags, types, and elements beyond rounding") {
  CompileReport r;
  const Graph g = scaled("0.5");
  (void)compile_graph(g, CompileOptions{}, &r);
  const HostArray x = filled(TensorType{DType::f32, {5, 7}, {}}, -0.3f);
  const HostArray w = filled(TensorType{DType::f32, {7}, {}}, 0.1f);
  std::vector<HostArray> params{w};
  const std::vector<HostArray> ref = interpret(g, std::vector<HostArray>{x}, params);
  auto record = [&](const HostArray& out1) {
    RunRecord rec;
    rec.add("output 0", ref[0], 0, {PlanSource::Output, 0});
    rec.add("output 1", out1, 0, {PlanSource::Output, 1});
    return rec;
  };
  const RunRecord traced = record(ref[1]);
  CHECK(first_run_difference(g, traced, record(ref[1]), 2, std::span(&x, 1), params).index == -1);
  CHECK(first_run_difference(g, traced, record(HostArray{}), 2, std::span(&x, 1), params).how ==
        "is defined traced but undefined eagerly");
  RunRecord flagged = record(ref[1]);
  flagged.flags[0] = 1;
  RunDifference d = first_run_difference(g, flagged, traced, 2, std::span(&x, 1), params);
  CHECK(d.index == 0);
  CHECK(d.how == "has flag 1 traced but 0 eagerly");
  HostArray off = HostArray::make(ref[1].type);
  copy_to(ref[1].view(), off.view());
  off.data<float>()[3] += 1.0f;
  d = first_run_difference(g, traced, record(off), 2, std::span(&x, 1), params);
  CHECK(d.index == 1);
  CHECK(d.how.find("differs at element 3: traced ") == 0);
  CHECK(first_run_difference(g, traced, record(off), 1, std::span(&x, 1), params).index == -1);
  // The value and the kernel that computes it, for the message.
  const std::string where = plan_value_str(g, r, {PlanSource::Output, 1});
  CHECK(where.find("the traced value is %6 (exp), computed by kernel k") == 0);
  CHECK(plan_value_str(g, r, {}).empty());
  // check_runs: nothing when the runs agree; else the error, at the value's line.
  Graph located = g;
  located.node(6).loc = SourceLoc("model.cpp", 4);
  const SourceLoc call("call.cpp", 9);
  check_runs(located, r, traced, record(ref[1]), 2, std::span(&x, 1), params, "f", call);
  try {
    check_runs(located, r, traced, record(off), 2, std::span(&x, 1), params, "f", call);
    FAIL("expected a difference");
  } catch (const Error& e) {
    CHECK(e.message().find("KILN_CHECK: after a call of 'f', output 1 differs at element 3") == 0);
    CHECK(e.message().find("; the traced value is %6 (exp) from model.cpp:4, computed by kernel") !=
          std::string::npos);
    CHECK(e.message().find("every kernel matched the reference kernels") != std::string::npos);
    CHECK(e.where() == SourceLoc("model.cpp", 4));
  }
  // An entry the graph computes none of: no value to blame, the call's line.
  RunRecord unsourced = traced;
  unsourced.sources[1] = {};
  try {
    check_runs(located, r, unsourced, record(off), 2, std::span(&x, 1), params, "f", call);
    FAIL("expected a difference");
  } catch (const Error& e) {
    CHECK(e.message().find("traced value") == std::string::npos);
    CHECK(e.where() == call);
  }
}
