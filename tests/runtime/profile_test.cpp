// The profile (runtime/profile.h): step totals, trace events, the trace-event
// file's JSON, its bound, and steps recorded by the CPU executor.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "runtime/plan.h"
#include "runtime/profile.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".json");
}

// Adds a kernel "double" (out[i] = 2 * in[i]) over 8 floats to a plan.
void double_kernel(void* const* b, int64_t begin, int64_t end) {
  const float* in = static_cast<const float*>(b[0]);
  float* out = static_cast<float*>(b[1]);
  for (int64_t i = begin; i < end; ++i) out[i] = 2 * in[i];
}

}  // namespace

TEST_CASE("ms_since gives the steady clock's milliseconds since a time point") {
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(ms_since(t0 + std::chrono::hours(1)) < -3.5e6);  // a point ahead: negative
  CHECK(ms_since(t0 - std::chrono::seconds(2)) >= 2000.0);
  CHECK(ms_since(t0 - std::chrono::seconds(2)) < 2000.0 + 3.6e6);
}

TEST_CASE("trace events become a Chrome trace-event file with costs, threads and names") {
  const size_t mark = trace_size();
  set_plan_profiling(true);
  {
    TraceSpan call("call", "f");
    TraceEvent e;
    e.name = "k0_elementwise_add";
    e.start_us = trace_now_us();
    e.dur_us = 1.5;
    e.thread = trace_thread();
    e.what = "kernel";
    e.step = 0;
    e.end = 100;
    e.parts = 2;
    e.cost = std::make_shared<StepCost>(StepCost{"elementwise", 800, 400, 100, "model.cpp:3"});
    record_trace_event(e);
  }
  set_plan_profiling(false);
  {
    TraceSpan off("call", "not recorded");  // profiling is off
  }
  const std::vector<TraceEvent> events = trace_events(mark);
  REQUIRE(events.size() == 2);
  CHECK(count_steps(events) == 1);
  CHECK(events[1].cat == std::string("call"));
  CHECK(events[1].dur_us >= 0);
  CHECK(plan_profile_report().find("k0_elementwise_add") != std::string::npos);

  const fs::path path = temp_file("kiln_trace_test");
  write_chrome_trace(path.string(), events);
  const nlohmann::json doc = read_json(path);
  const auto& list = doc.at("traceEvents");
  const auto step = std::find_if(list.begin(), list.end(), [](const auto& e) { return e.value("cat", "") == "step"; });
  REQUIRE(step != list.end());
  CHECK((*step)["ph"] == "X");
  CHECK((*step)["name"] == "k0_elementwise_add");
  CHECK((*step)["pid"] == ::getpid());
  CHECK((*step)["args"]["bytes_read"] == 800);
  CHECK((*step)["args"]["bytes_written"] == 400);
  CHECK((*step)["args"]["flops"] == 100);
  CHECK((*step)["args"]["source"] == "model.cpp:3");
  CHECK((*step)["args"]["kind"] == "elementwise");
  CHECK((*step)["args"]["parts"] == 2);
  CHECK((*step)["args"]["range"] == 100);
  int thread_names = 0;
  for (const auto& e : list) thread_names += e["ph"] == "M" && e["name"] == "thread_name";
  CHECK(thread_names == 1);
  fs::remove(path);
  truncate_trace(mark);
  CHECK(trace_size() == mark);
}

TEST_CASE("the CPU executor records one event per step, and the parts of a split kernel") {
  Plan plan;
  plan.device = Device();
  const TensorType t{DType::f32, {1 << 12}, Device()};
  plan.slots = {PlanSlot{PlanSlot::Arg, 0, t}, PlanSlot{PlanSlot::Output, 0, t}};
  plan.outputs = {1};
  plan.num_args = 1;
  PlanStep s;
  s.name = "k1_double";
  s.slots = {0, 1};
  s.what = step::CpuKernel{double_kernel, {}, 1 << 12, 1 << 10};  // split in parts of >= 1024
  s.cost = std::make_shared<StepCost>(StepCost{"elementwise", 1 << 14, 1 << 14, 1 << 12, "x.cpp:1"});
  plan.steps = {s, s};
  plan.steps[1].name = "k2_double";
  std::vector<float> in(1 << 12, 1.f), out(1 << 12);
  void* args[] = {in.data()};
  void* outs[] = {out.data()};

  const size_t mark = trace_size();
  set_plan_profiling(true);
  execute_cpu_plan(plan, args, nullptr, outs);
  set_plan_profiling(false);
  CHECK(out[7] == 2.f);
  const std::vector<TraceEvent> events = trace_events(mark);
  CHECK(count_steps(events) == 2);
  int64_t covered = 0, parts = 0;
  for (const TraceEvent& e : events) {
    if (e.cat == std::string("chunk") && e.name == "k1_double") covered += e.end - e.begin;
    if (e.cat == std::string("step") && e.name == "k1_double") {
      parts = e.parts;
      CHECK(e.step == 0);
      CHECK(e.what == std::string("kernel"));
      REQUIRE(e.cost);
      CHECK(e.cost->source == "x.cpp:1");
    }
  }
  CHECK(covered == 1 << 12);  // the parts cover the outer loop once
  CHECK(parts >= 1);
  truncate_trace(mark);
  execute_cpu_plan(plan, args, nullptr, outs);  // profiling off: nothing recorded
  CHECK(trace_size() == mark);
}

TEST_CASE("the trace keeps at most kMaxTraceEvents events and says how many it dropped") {
  const size_t mark = trace_size();
  const size_t dropped = trace_dropped();
  TraceEvent e;
  e.name = "x";
  e.cat = "chunk";
  for (size_t i = mark; i < kMaxTraceEvents + 3; ++i) record_trace_event(e);
  CHECK(trace_size() == kMaxTraceEvents);
  CHECK(trace_dropped() == dropped + 3);
  const fs::path path = temp_file("kiln_trace_full");
  write_chrome_trace(path.string(), trace_events(kMaxTraceEvents - 1));
  CHECK(read_json(path).at("otherData").at("dropped_events") == dropped + 3);
  fs::remove(path);
  truncate_trace(mark);
}

TEST_CASE("profiled turns profiling on for its run only and returns what the run recorded") {
  REQUIRE_FALSE(plan_profiling());
  const size_t mark = trace_size();
  const std::vector<TraceEvent> events = profiled([] {
    CHECK(plan_profiling());
    TraceSpan span("call", "profiled run");
  });
  CHECK_FALSE(plan_profiling());
  REQUIRE(events.size() == 1);
  CHECK(events[0].name == "profiled run");
  CHECK(trace_size() == mark);  // profiling was off: the events leave the trace
  CHECK_THROWS_AS(profiled([] { throw Error("in the run"); }), Error);
  CHECK_FALSE(plan_profiling());

  set_plan_profiling(true);  // on already (KILN_LOG=profile): the events stay for its file
  const size_t on_mark = trace_size();
  CHECK(profiled([] { TraceSpan span("call", "kept"); }).size() == 1);
  CHECK(plan_profiling());
  CHECK(trace_size() == on_mark + 1);
  truncate_trace(on_mark);
  set_plan_profiling(false);
}
