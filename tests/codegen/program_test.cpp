// A traced program compiled (codegen/program.h): the forward at once, with the
// partition's record heading its report; the backward on its first use, once;
// the listener told of both; a compile in the background handing its log or
// error to the next caller once. And the background compile queue
// (codegen/compile_queue.h): tasks in order, drained on request.
#include <doctest/doctest.h>

#include <mutex>
#include <vector>

#include "codegen/compile_queue.h"
#include "codegen/program.h"
#include "ir/parser.h"

using namespace kiln;

namespace {

constexpr const char* kForward =
    "%0 = arg {index=0} : f32[4,3]\n"
    "%1 = exp %0 : f32[4,3]\n"
    "%2 = sum %1 {dims=[1], keepdim=0} : f32[4]\n"
    "return %2, %1\n";

constexpr const char* kBackward =
    "%0 = arg {index=0} : f32[4,3]\n"
    "%1 = arg {index=1} : f32[4,3]\n"
    "%2 = mul %0, %1 : f32[4,3]\n"
    "return %2\n";

}  // namespace

TEST_CASE("compile_program compiles the forward now and the backward on its first use, once") {
  std::vector<size_t> told;  // steps per compile the listener heard of
  const CompileListener listener = [&](const CompileReport&, size_t steps, double ms) {
    CHECK(ms >= 0);
    told.push_back(steps);
  };
  const std::vector<PassRecord> partition{{"partition", true, 0.5, "", true}};
  CompiledProgram p =
      compile_program(parse_graph(kForward), std::make_unique<Graph>(parse_graph(kBackward)),
                      partition, CompileOptions{}, listener, "f");
  REQUIRE(p.plan);
  REQUIRE(p.report);
  REQUIRE(!p.report->passes.empty());
  CHECK(p.report->passes.front().name == "partition");
  CHECK(told.size() == 1);
  CHECK(told.front() == p.plan->steps.size());
  CHECK(p.summary().find("compiled " + std::to_string(p.plan->steps.size()) + " steps in") == 0);
  REQUIRE(p.backward);
  CHECK(p.backward->graph().outputs.size() == 1);
  const std::shared_ptr<Plan> first = p.backward->get();
  CHECK(told.size() == 2);
  CHECK(p.backward->get() == first);  // compiled once
  CHECK(told.size() == 2);
}

TEST_CASE("compile_program without a backward makes none") {
  CompiledProgram p =
      compile_program(parse_graph(kForward), nullptr, {}, CompileOptions{}, nullptr, "f");
  CHECK(p.plan);
  CHECK(!p.backward);
}

TEST_CASE("the background compile queue runs its tasks in order, and drains on request") {
  std::mutex mu;
  std::vector<int> ran;
  for (int i = 0; i < 5; ++i)
    post_background_compile([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      ran.push_back(i);
    });
  drain_background_compiles();
  std::lock_guard<std::mutex> lock(mu);
  CHECK(ran == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("BackgroundCompile: ready once run; its log line or its error handed over once") {
  auto owner = std::make_shared<int>(0);
  BackgroundCompile ok, failed, dropped;
  CHECK(ok.ready());
  std::mutex gate;
  std::unique_lock<std::mutex> hold(gate);  // keeps the queue's first task from finishing
  ok.post(owner, [&] {
    std::lock_guard<std::mutex> wait(gate);
    return std::string("compiled\n");
  });
  CHECK(!ok.ready());
  failed.post(owner, []() -> std::string { throw Error("no kernel"); });
  bool ran = false;
  dropped.post(std::make_shared<int>(1), [&] {  // its owner is gone before its turn
    ran = true;
    return std::string("never");
  });
  hold.unlock();
  drain_background_compiles();
  CHECK(ok.ready());
  CHECK(ok.finish() == "compiled\n");
  CHECK(ok.finish().empty());
  CHECK(failed.ready());
  CHECK_THROWS_WITH_AS(failed.finish(), doctest::Contains("no kernel"), Error);
  CHECK(failed.finish().empty());
  CHECK(!ran);
  CHECK(!dropped.ready());
}

TEST_CASE("compiles_in_background: CPU arguments, not CUDA ones; collectives only across ranks") {
  const Graph g = parse_graph(kForward);
  const std::vector<TensorType> cpu{g.type(g.outputs[1])};
  CHECK(compiles_in_background(g, cpu));
  // The CUDA backend compiles every size, and only on the caller's thread.
  std::vector<TensorType> cuda = cpu;
  cuda[0].device = Device(kCUDA);
  CHECK_FALSE(compiles_in_background(g, cuda));
  // A collective in a single process (no ranks started) runs nothing across ranks.
  const Graph reduce = parse_graph(
      "%0 = arg {index=0} : f32[4]\n"
      "%1 = all_reduce %0 {reduce=\"avg\", world=2} : f32[4]\n"
      "return %1\n");
  CHECK(compiles_in_background(reduce, {&reduce.type(reduce.outputs[0]), 1}));
}
