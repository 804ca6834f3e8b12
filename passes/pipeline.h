// The pipeline: one straight, named list (DESIGN.md, "Passes") from the traced
// graph to its schedule:
//   partition
//     (as a call is traced, with the trace's builder: passes/partition.h)
//   -> verify -> simplify -> fold_constants -> cse -> dce -> split_scans -> bucket_collectives
//     (graph passes: a graph in, a graph out)
//   -> fusion -> fold_transposes -> collectives -> memory
//     (the schedule's steps, passes/schedule.h: the same for every backend)
//   -> lower
//     (the code generator lowers each group once, codegen/compile.cpp: which
//     outputs its kernel may store over which inputs, Schedule::overwritable)
//   -> in_place -> accumulate
//     (the schedule's steps that read what lowering found)
// With a log, every stage is timed (a graph pass is also compared with its
// input); with `record` its output text is kept (the graph after a pass, a
// step's decisions).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/partition.h"
#include "passes/schedule.h"

namespace kiln {

struct PassRecord {
  std::string name;
  bool changed = false;
  double ms = 0;
  std::string graph_text;  // the stage's output text (only when recording)
  /// False for the schedule's steps, whose text is not a graph.
  bool graph = true;
};

/// Whether the verifier runs after every graph pass unless told otherwise:
/// KILN_VERIFY (default: on in builds without NDEBUG, off in release builds;
/// the test suites run with it on, tests/CMakeLists.txt).
bool verify_passes_by_default();

struct PipelineOptions {
  /// Keep each stage's output text in the log, and say in it whether a graph
  /// pass changed its input (PassRecord::changed; without record it stays false).
  bool record = false;
  bool verify = verify_passes_by_default();  // run the verifier after every graph pass
  ScheduleOptions schedule;
};

/// What the pipeline makes of a graph: the optimised graph and its schedule.
struct Pipelined {
  Graph graph;
  Schedule schedule;
};

/// The first stage, `partition` (passes/partition.h), which runs as a call is
/// traced: the gradient nodes are built with the builder that recorded it. With
/// `log`, appends its record (with `record`, its text: partition_str).
Partition run_partition(Builder& traced, const PartitionRequest& req,
                        std::vector<PassRecord>* log = nullptr, bool record = false);

/// Runs every stage after the partition (run_partition runs that one as the
/// graph is traced) up to the `lower` stage, in order; appends one record per
/// stage to `log` if given. The code generator lowers the groups, then
/// finish_pipeline runs the stages after it.
Pipelined run_pipeline(const Graph& g, const PipelineOptions& opts = {},
                       std::vector<PassRecord>* log = nullptr);

/// The `lower` stage's record (the code generator ran it, taking `ms`; its
/// text: which outputs may be stored over which inputs), then the stages after
/// it, run on p.schedule, whose overwritable lowering has filled in.
void finish_pipeline(Pipelined& p, const PipelineOptions& opts, double lower_ms,
                     std::vector<PassRecord>* log = nullptr);

/// The graph passes alone (the first half of the list): the optimised graph.
Graph optimize_graph(const Graph& g, const PipelineOptions& opts = {},
                     std::vector<PassRecord>* log = nullptr);

/// Every stage's name, in order: the partition, the graph passes, then the
/// schedule's steps with the `lower` stage among them.
const std::vector<std::string>& pipeline_pass_names();

}  // namespace kiln
