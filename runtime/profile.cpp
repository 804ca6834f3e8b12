// Plan-step totals and the trace-event file (see profile.h).
#include "runtime/profile.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "runtime/binary_io.h"

namespace kiln {
namespace {

std::atomic<bool> g_profiling{false};

struct StepTotals {
  double ms = 0;
  int64_t calls = 0;
};

// Never destroyed: KILN_LOG=profile reads it at exit, after static destructors may have run.
struct Profile {
  std::mutex mu;
  std::map<std::string, StepTotals> totals;
  std::vector<TraceEvent> events;
  size_t dropped = 0;
  const std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
};

Profile& profile() {
  static Profile* p = new Profile;
  return *p;
}

std::atomic<uint32_t> g_next_thread{0};

}  // namespace

void set_plan_profiling(bool on) {
  (void)profile();  // the clock starts no later than the first event
  g_profiling = on;
}

bool plan_profiling() {
  return g_profiling.load(std::memory_order_relaxed);
}

void reset_plan_profile() {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  p.totals.clear();
}

std::string plan_profile_report() {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  std::vector<std::pair<std::string, StepTotals>> rows(p.totals.begin(), p.totals.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.ms > b.second.ms; });
  double total = 0;
  for (auto& r : rows) total += r.second.ms;
  std::ostringstream os;
  os << "kiln profile: " << total << " ms in plan steps\n";
  for (auto& [name, t] : rows)
    os << "  " << t.ms << " ms  " << (total > 0 ? 100 * t.ms / total : 0) << "%  " << t.calls
       << " calls  " << name << "\n";
  return os.str();
}

double trace_now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                   profile().origin)
      .count();
}

uint32_t trace_thread() {
  thread_local const uint32_t id = g_next_thread.fetch_add(1);
  return id;
}

void record_trace_event(TraceEvent e) {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  if (e.cat == std::string_view("step") || e.cat == std::string_view("copies")) {
    StepTotals& t = p.totals[e.name];
    t.ms += e.dur_us / 1000;
    t.calls++;
  }
  if (p.events.size() >= kMaxTraceEvents) {
    p.dropped++;
    return;
  }
  p.events.push_back(std::move(e));
}

TraceSpan::TraceSpan(const char* cat, std::string name)
    : on_(plan_profiling()), cat_(cat), name_(std::move(name)) {
  if (on_) start_ = trace_now_us();
}

TraceSpan::~TraceSpan() {
  if (!on_) return;
  TraceEvent e;
  e.name = std::move(name_);
  e.cat = cat_;
  e.start_us = start_;
  e.dur_us = trace_now_us() - start_;
  e.thread = trace_thread();
  record_trace_event(std::move(e));
}

size_t trace_size() {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.events.size();
}

std::vector<TraceEvent> trace_events(size_t mark) {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  if (mark >= p.events.size()) return {};
  return std::vector<TraceEvent>(p.events.begin() + static_cast<std::ptrdiff_t>(mark),
                                 p.events.end());
}

void truncate_trace(size_t mark) {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  if (mark < p.events.size()) p.events.resize(mark);
}

std::vector<TraceEvent> profiled(const std::function<void()>& run) {
  const bool was_on = plan_profiling();
  const size_t mark = trace_size();
  set_plan_profiling(true);
  try {
    run();
  } catch (...) {
    set_plan_profiling(was_on);
    if (!was_on) truncate_trace(mark);
    throw;
  }
  set_plan_profiling(was_on);
  std::vector<TraceEvent> events = trace_events(mark);
  if (!was_on) truncate_trace(mark);
  return events;
}

size_t trace_dropped() {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.dropped;
}

size_t count_steps(const std::vector<TraceEvent>& events) {
  return static_cast<size_t>(std::count_if(events.begin(), events.end(), [](const TraceEvent& e) {
    return e.cat == std::string_view("step");
  }));
}

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  using nlohmann::json;
  const int pid = static_cast<int>(::getpid());
  json list = json::array();
  std::set<uint32_t> callers, workers;
  for (const TraceEvent& e : events) {
    json ev = {{"name", e.name},  {"cat", e.cat}, {"ph", "X"},      {"ts", e.start_us},
               {"dur", e.dur_us}, {"pid", pid},   {"tid", e.thread}};
    json args = json::object();
    const std::string_view cat = e.cat;
    if (cat == "step") {
      args["step"] = e.step;
      args["what"] = e.what;
      if (e.parts > 0) {
        args["range"] = e.end - e.begin;
        args["parts"] = e.parts;
      }
    }
    if (cat == "chunk") {
      args["begin"] = e.begin;
      args["end"] = e.end;
    }
    if (e.cost) {
      args["kind"] = e.cost->kind;
      args["bytes_read"] = e.cost->bytes_read;
      args["bytes_written"] = e.cost->bytes_written;
      args["flops"] = e.cost->flops;
      args["source"] = e.cost->source;
    }
    if (!args.empty()) ev["args"] = std::move(args);
    list.push_back(std::move(ev));
    (cat == "chunk" ? workers : callers).insert(e.thread);
  }
  for (uint32_t t : workers)
    if (!callers.count(t))
      list.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", t},
                      {"args", {{"name", "kiln pool thread " + std::to_string(t)}}}});
  for (uint32_t t : callers)
    list.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", pid},
                    {"tid", t},
                    {"args", {{"name", "kiln thread " + std::to_string(t)}}}});
  list.push_back({{"name", "process_name"},
                  {"ph", "M"},
                  {"pid", pid},
                  {"tid", 0},
                  {"args", {{"name", "kiln"}}}});
  json doc = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  const size_t dropped = trace_dropped();
  if (dropped > 0) doc["otherData"] = {{"dropped_events", dropped}};
  io::write_file_durable(path, doc.dump(1) + "\n");
}

}  // namespace kiln
