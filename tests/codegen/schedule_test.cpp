// The schedule (passes/schedule.h): its steps in order, stated on IR text.
#include <doctest/doctest.h>

#include <algorithm>

#include "codegen/compile.h"
#include "codegen/lower.h"
#include "passes/pipeline.h"
#include "ir/parser.h"
#include "runtime/interpreter.h"
#include "runtime/plan.h"

using namespace kiln;

namespace {

// The schedule as compile_graph makes it: its steps before the `lower` stage,
// each group lowered (what its kernel may store over its inputs), the rest.
Schedule scheduled(std::string_view ir, std::vector<PassRecord>* log = nullptr) {
  const Graph g = parse_graph(ir);
  Schedule s = schedule_graph(g, {}, log, /*record=*/true);
  s.overwritable.resize(s.groups.size());
  for (size_t gi = 0; gi < s.groups.size(); ++gi)
    if (s.groups[gi].kind == GroupKind::Elementwise || s.groups[gi].kind == GroupKind::Matmul)
      s.overwritable[gi] = overwritable(s.groups[gi], lower_group(g, s.groups[gi]));
  if (log) log->push_back({"lower", true, 0, schedule_steps::lower_str(g, s), false});
  finish_schedule(g, {}, s, log, /*record=*/true);
  return s;
}

}  // namespace

TEST_CASE("the schedule's steps run in order and print for dumps") {
  std::vector<PassRecord> log;
  scheduled(
      "%0 = arg {index=0} : f32[8]\n"
      "%1 = exp %0 : f32[8]\n"
      "return %1\n",
      &log);
  const std::vector<std::string> steps = {"fusion", "fold_transposes", "collectives", "memory",
                                          "lower",  "in_place",        "accumulate"};
  REQUIRE(log.size() == steps.size());
  for (size_t i = 0; i < log.size(); ++i) {
    CHECK(log[i].name == steps[i]);
    CHECK_FALSE(log[i].graph);
    CHECK_FALSE(log[i].graph_text.empty());
  }
  CHECK(log[1].graph_text == "no transposes folded\n");
  CHECK(log[4].graph_text ==
        "group 0: %1 may be stored over %0 (its kernel reads it only where it writes)\n");
  CHECK(log[5].graph_text == "no parameter updates in place\n");
}

TEST_CASE("an SGD update is stored over its parameter, which the kernel reads where it writes") {
  std::vector<PassRecord> log;
  const Schedule s = scheduled(
      "%0 = arg {index=0} : f32[4,8]\n"
      "%1 = param {index=0} : f32[4,8]\n"
      "%2 = constant {value=0.5} : f32[4,8]\n"
      "%3 = mul %0, %2 : f32[4,8]\n"
      "%4 = sub %1, %3 : f32[4,8]\n"
      "update 0 = %4\n",
      &log);
  REQUIRE(s.groups.size() == 1);
  REQUIRE(s.in_place[0].size() == 1);
  CHECK(s.in_place[0][0] == std::pair<Value, Value>{Value(4), Value(1)});
  CHECK(s.direct[0].empty());
  CHECK_FALSE(s.accumulate[0]);
  CHECK(log[5].graph_text == "group 0: %4 stored over param %1 (read only where written)\n");
}

TEST_CASE("an update that reads its parameter transposed keeps a copy") {
  const Schedule s = scheduled(
      "%0 = param {index=0} : f32[4,4]\n"
      "%1 = permute %0 {perm=[1, 0]} : f32[4,4]\n"
      "%2 = add %0, %1 : f32[4,4]\n"
      "update 0 = %2\n");
  REQUIRE_FALSE(s.groups.empty());
  for (const auto& pairs : s.in_place) CHECK(pairs.empty());
  for (const auto& pairs : s.direct) CHECK(pairs.empty());
}

TEST_CASE("P - c * (P @ X) is not accumulated into P, nor is a lone matmul of P stored over P") {
  // BLAS must not read an operand it writes: the epilogue alone may run in place.
  const Schedule s = scheduled(
      "%0 = arg {index=0} : f32[4,4]\n"
      "%1 = param {index=0} : f32[4,4]\n"
      "%2 = matmul %1, %0 : f32[4,4]\n"
      "%3 = constant {value=0.5} : f32[4,4]\n"
      "%4 = mul %2, %3 : f32[4,4]\n"
      "%5 = sub %1, %4 : f32[4,4]\n"
      "update 0 = %5\n");
  REQUIRE_FALSE(s.groups.empty());
  for (const auto& a : s.accumulate) CHECK_FALSE(a);
  const Schedule lone = scheduled(
      "%0 = arg {index=0} : f32[4,4]\n"
      "%1 = param {index=0} : f32[4,4]\n"
      "%2 = matmul %1, %0 : f32[4,4]\n"
      "update 0 = %2\n");
  REQUIRE_FALSE(lone.groups.empty());
  for (const auto& pairs : lone.in_place) CHECK(pairs.empty());
}

TEST_CASE("P - c * (a @ b) stored over P is one accumulating matmul; a transpose feeding it folds") {
  std::vector<PassRecord> log;
  const Schedule s = scheduled(
      "%0 = arg {index=0} : f32[4,3]\n"
      "%1 = arg {index=1} : f32[5,3]\n"
      "%2 = param {index=0} : f32[4,5]\n"
      "%3 = permute %1 {perm=[1, 0]} : f32[3,5]\n"
      "%4 = matmul %0, %3 : f32[4,5]\n"
      "%5 = constant {value=0.25} : f32[4,5]\n"
      "%6 = mul %4, %5 : f32[4,5]\n"
      "%7 = sub %2, %6 : f32[4,5]\n"
      "update 0 = %7\n",
      &log);
  CHECK(s.folded_transpose.at(Value(3)) == Value(1));
  for (const FusionGroup& g : s.groups) CHECK(g.kind != GroupKind::Copy);
  size_t mm = s.groups.size();
  for (size_t i = 0; i < s.groups.size(); ++i)
    if (s.groups[i].kind == GroupKind::Matmul) mm = i;
  REQUIRE(mm < s.groups.size());
  REQUIRE(s.accumulate[mm]);
  CHECK(*s.accumulate[mm] == -0.25);
  CHECK(log[1].graph_text == "%3 = transpose of %1: matmuls read %1 transposed\n");
  CHECK(log[6].graph_text ==
        "group " + std::to_string(mm) + ": %2 += -0.25 * matmul %4 (one BLAS call, beta = 1)\n");
}

// A reduction group's full-size side output (%3), reshaped (%4) and read by a
// matmul, which reads its operands from memory: the reshape is its own copy
// group, which folds.
constexpr std::string_view kReshapedSideOutput =
    "%0 = arg {index=0} : f32[2,3]\n"
    "%1 = exp %0 : f32[2,3]\n"
    "%2 = sum %1 {dims=[0], keepdim=0} : f32[3]\n"
    "%3 = neg %1 : f32[2,3]\n"
    "%4 = reshape %3 {shape=[3,2]} : f32[3,2]\n"
    "%5 = arg {index=1} : f32[2,5]\n"
    "%6 = matmul %4, %5 : f32[3,5]\n"
    "return %2, %6\n";

TEST_CASE("a reshape of a value a kernel writes is kept in that value's buffer, not copied") {
  std::vector<PassRecord> log;
  const Schedule s = scheduled(kReshapedSideOutput, &log);
  REQUIRE(s.folded_reshape.count(Value(4)));
  CHECK(s.folded_reshape.at(Value(4)) == Value(3));
  for (const FusionGroup& g : s.groups) CHECK(g.kind != GroupKind::Copy);
  CHECK(log[3].graph_text.rfind("%4 = reshape of %3: kept in %3's buffer\nmemory plan: ", 0) ==
        0);
  // The reduction's side output stays live until the reshape's last reader.
  REQUIRE(s.groups.size() == 2);
  CHECK(s.memory.group_output_buffer[0].size() == 2);
  CHECK(s.memory.group_output_buffer[1].size() == 1);
  const int32_t side = s.memory.group_output_buffer[0][1];
  CHECK(s.memory.group_output_buffer[1][0] != side);
}

TEST_CASE("a reshape returned, or of a graph input, is still copied") {
  const Schedule returned = scheduled(
      "%0 = arg {index=0} : f32[4,6]\n"
      "%1 = exp %0 : f32[4,6]\n"
      "%2 = sum %1 {dims=[0], keepdim=0} : f32[6]\n"
      "%3 = neg %1 : f32[4,6]\n"
      "%4 = reshape %3 {shape=[24]} : f32[24]\n"
      "return %2, %4\n");
  CHECK(returned.folded_reshape.empty());
  const Schedule of_input = scheduled(
      "%0 = param {index=0} : f32[4,6]\n"
      "%1 = reshape %0 {shape=[6,4]} : f32[6,4]\n"
      "%2 = arg {index=0} : f32[4,3]\n"
      "%3 = matmul %1, %2 : f32[6,3]\n"
      "return %3\n");
  CHECK(of_input.folded_reshape.empty());
  bool copied = false;
  for (const FusionGroup& g : of_input.groups) copied = copied || g.kind == GroupKind::Copy;
  CHECK(copied);
}

TEST_CASE("a folded reshape's readers read its source's buffer, with the reshape's shape") {
  const std::shared_ptr<Plan> plan = compile_graph(parse_graph(kReshapedSideOutput), {});
  CHECK(plan->steps.size() == 2);  // the reduction and its reader: no copy
  HostArray x = HostArray::make(TensorType{DType::f32, {2, 3}});
  for (int64_t i = 0; i < 6; ++i) x.data<float>()[i] = float(i % 7) * 0.25f - 0.75f;
  HostArray y = HostArray::make(TensorType{DType::f32, {2, 5}});
  for (int64_t i = 0; i < 10; ++i) y.data<float>()[i] = float(i % 3) * 0.5f - 0.25f;
  HostArray sum = HostArray::make(TensorType{DType::f32, {3}});
  HostArray out = HostArray::make(TensorType{DType::f32, {3, 5}});
  void* args[] = {x.data<float>(), y.data<float>()};
  void* outs[] = {sum.data<float>(), out.data<float>()};
  execute_cpu_plan(*plan, args, nullptr, outs);
  const std::vector<HostArray> want =
      interpret(parse_graph(kReshapedSideOutput), std::vector<HostArray>{x, y});
  REQUIRE(want.size() == 2);
  for (int64_t i = 0; i < 3; ++i)
    CHECK(sum.data<float>()[i] == doctest::Approx(want[0].data<float>()[i]));
  for (int64_t i = 0; i < 15; ++i)
    CHECK(out.data<float>()[i] == doctest::Approx(want[1].data<float>()[i]));
}

// A kernel that writes a value and a reshape of it (a padded gradient that one
// group reads whole and another, a matmul here, through a reshape): one buffer
// holds both.
constexpr std::string_view kPadAndItsReshape =
    "%0 = arg {index=0} : f32[4,6]\n"
    "%1 = pad %0 {dim=1, low=1, high=1, interior=0} : f32[4,8]\n"
    "%2 = reshape %1 {shape=[8,4]} : f32[8,4]\n"
    "%3 = arg {index=1} : f32[4,5]\n"
    "%4 = matmul %2, %3 : f32[8,5]\n"
    "return %1, %4\n";

TEST_CASE("a kernel's output that is a reshape of another of its outputs shares its buffer") {
  const Schedule s = scheduled(kPadAndItsReshape);
  REQUIRE(s.folded_reshape.count(Value(2)));
  CHECK(s.folded_reshape.at(Value(2)) == Value(1));
  bool one_output = false;
  for (const FusionGroup& g : s.groups)
    if (std::find(g.nodes.begin(), g.nodes.end(), NodeId(1)) != g.nodes.end())
      one_output = g.outputs == std::vector<Value>{Value(1)};
  CHECK(one_output);
  const std::shared_ptr<Plan> plan = compile_graph(parse_graph(kPadAndItsReshape), {});
  HostArray x = HostArray::make(TensorType{DType::f32, {4, 6}});
  for (int64_t i = 0; i < 24; ++i) x.data<float>()[i] = float(i % 7) * 0.25f - 0.75f;
  HostArray y = HostArray::make(TensorType{DType::f32, {4, 5}});
  for (int64_t i = 0; i < 20; ++i) y.data<float>()[i] = float(i % 3) * 0.5f - 0.25f;
  HostArray padded = HostArray::make(TensorType{DType::f32, {4, 8}});
  HostArray out = HostArray::make(TensorType{DType::f32, {8, 5}});
  void* args[] = {x.data<float>(), y.data<float>()};
  void* outs[] = {padded.data<float>(), out.data<float>()};
  execute_cpu_plan(*plan, args, nullptr, outs);
  const std::vector<HostArray> want =
      interpret(parse_graph(kPadAndItsReshape), std::vector<HostArray>{x, y});
  REQUIRE(want.size() == 2);
  for (int64_t i = 0; i < 32; ++i) CHECK(padded.data<float>()[i] == want[0].data<float>()[i]);
  for (int64_t i = 0; i < 40; ++i)
    CHECK(out.data<float>()[i] == doctest::Approx(want[1].data<float>()[i]));
}
