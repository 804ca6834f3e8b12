// The pipeline, as one straight list. A graph pass is timed and, when asked,
// verified and recorded (its text, and whether it changed its input's text); a
// schedule step is timed and, when asked, its decisions are printed.
#include "passes/pipeline.h"

#include <chrono>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/env.h"
#include "passes/collectives.h"
#include "passes/constant_fold.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/simplify.h"
#include "passes/split_column_sums.h"
#include "passes/split_scans.h"

namespace kiln {

namespace {

// A stage is a graph pass (`pass`), a schedule step (`step`, with `str`), the
// partition, which runs as the call is traced (run_partition), or `lower`,
// which the code generator runs between the schedule's steps (finish_pipeline).
struct Stage {
  const char* name;
  Graph (*pass)(const Graph&) = nullptr;
  void (*step)(const Graph&, const ScheduleOptions&, Schedule&) = nullptr;
  std::string (*str)(const Graph&, const Schedule&) = nullptr;
};

namespace ss = schedule_steps;

constexpr Stage kStages[] = {
    {"partition"},
    {"simplify", simplify},
    {"fold_constants", fold_constants},
    {"cse", cse},
    {"dce", dce},
    {"split_scans", split_scans},
    {"split_column_sums", split_column_sums},
    {"bucket_collectives", bucket_collectives},
    {"fusion", nullptr, ss::fuse, ss::fuse_str},
    {"fold_transposes", nullptr, ss::fold_transposes, ss::fold_transposes_str},
    {"collectives", nullptr, ss::collectives, ss::collectives_str},
    {"memory", nullptr, ss::memory, ss::memory_str},
    {"lower", nullptr, nullptr, ss::lower_str},
    {"in_place", nullptr, ss::in_place, ss::in_place_str},
    {"accumulate", nullptr, ss::accumulate, ss::accumulate_str},
};

void verify_after(const Graph& g, const char* when) {
  try {
    verify(g);
  } catch (const Error& e) {
    throw Error(std::string("invalid graph ") + when + ": " + e.what());
  }
}

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

bool verify_passes_by_default() {
#ifdef NDEBUG
  constexpr bool kDebugBuild = false;
#else
  constexpr bool kDebugBuild = true;
#endif
  static const bool on = env::flag("KILN_VERIFY", kDebugBuild);
  return on;
}

Partition run_partition(Builder& traced, const PartitionRequest& req, std::vector<PassRecord>* log,
                        bool record) {
  const std::string before = log && record ? print_graph(traced.graph()) : std::string();
  const auto start = std::chrono::steady_clock::now();
  Partition p = partition(traced, req);
  const auto stop = std::chrono::steady_clock::now();
  if (log) {
    PassRecord r;
    r.name = kStages[0].name;
    r.ms = ms_between(start, stop);
    if (record) {
      r.changed = p.split || print_graph(p.forward) != before;
      r.graph_text = partition_str(p);
    }
    log->push_back(std::move(r));
  }
  return p;
}

Graph optimize_graph(const Graph& g, const PipelineOptions& opts, std::vector<PassRecord>* log) {
  if (opts.verify) verify_after(g, "given to the pipeline");
  Graph current = g;
  // Printing a graph per pass costs as much as a pass: only for a record.
  const bool texts = log && opts.record;
  std::string text = texts ? print_graph(current) : std::string();
  for (const Stage& stage : kStages) {
    if (!stage.pass) continue;
    auto start = std::chrono::steady_clock::now();
    Graph next = stage.pass(current);
    auto stop = std::chrono::steady_clock::now();
    if (opts.verify) verify_after(next, (std::string("after pass ") + stage.name).c_str());
    if (log) {
      PassRecord r;
      r.name = stage.name;
      r.ms = ms_between(start, stop);
      if (texts) {
        r.graph_text = print_graph(next);
        r.changed = r.graph_text != text;
        text = r.graph_text;
      }
      log->push_back(std::move(r));
    }
    current = std::move(next);
  }
  return current;
}

namespace {

// Runs the schedule's steps of kStages [from, to) on s.
void run_steps(const Graph& g, const ScheduleOptions& opts, Schedule& s, const Stage* from,
               const Stage* to, std::vector<PassRecord>* log, bool record) {
  for (const Stage* stage = from; stage != to; ++stage) {
    if (!stage->step) continue;
    const auto start = std::chrono::steady_clock::now();
    stage->step(g, opts, s);
    const auto stop = std::chrono::steady_clock::now();
    if (!log) continue;
    PassRecord r;
    r.name = stage->name;
    r.graph = false;
    r.changed = true;
    r.ms = ms_between(start, stop);
    if (record) r.graph_text = stage->str(g, s);
    log->push_back(std::move(r));
  }
}

// The `lower` stage in kStages.
const Stage* lower_stage() {
  for (const Stage& s : kStages)
    if (std::string_view(s.name) == "lower") return &s;
  throw Error("internal: no lower stage in the pipeline");
}

}  // namespace

Schedule schedule_graph(const Graph& g, const ScheduleOptions& opts, std::vector<PassRecord>* log,
                        bool record) {
  Schedule s;
  run_steps(g, opts, s, std::begin(kStages), lower_stage(), log, record);
  return s;
}

void finish_schedule(const Graph& g, const ScheduleOptions& opts, Schedule& s,
                     std::vector<PassRecord>* log, bool record) {
  run_steps(g, opts, s, lower_stage() + 1, std::end(kStages), log, record);
}

Pipelined run_pipeline(const Graph& g, const PipelineOptions& opts, std::vector<PassRecord>* log) {
  Pipelined out;
  out.graph = optimize_graph(g, opts, log);
  out.schedule = schedule_graph(out.graph, opts.schedule, log, opts.record);
  return out;
}

void finish_pipeline(Pipelined& p, const PipelineOptions& opts, double lower_ms,
                     std::vector<PassRecord>* log) {
  if (log) {
    PassRecord r;
    r.name = lower_stage()->name;
    r.graph = false;
    r.changed = true;
    r.ms = lower_ms;
    if (opts.record) r.graph_text = lower_stage()->str(p.graph, p.schedule);
    log->push_back(std::move(r));
  }
  finish_schedule(p.graph, opts.schedule, p.schedule, log, opts.record);
}

const std::vector<std::string>& pipeline_pass_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Stage& s : kStages) v.push_back(s.name);
    return v;
  }();
  return names;
}

}  // namespace kiln
