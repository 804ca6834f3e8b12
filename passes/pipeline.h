// The pass pipeline: one straight, named list (DESIGN.md, "Passes").
//   verify -> simplify -> fold_constants -> cse -> dce -> bucket_collectives, then the
// schedule's steps (codegen/schedule.h: fusion ... accumulate).
// With dumping on, the graph after each pass is kept (or marked unchanged),
// with the time each pass took.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct PassRecord {
  std::string name;
  bool changed = false;
  double ms = 0;
  std::string graph_text;  // the graph after the pass (only when recording)
  /// False for the schedule's steps (codegen/schedule.h), whose text is not a graph.
  bool graph = true;
};

struct PipelineOptions {
  bool record = false;  // keep each pass's output text in the log
  bool verify = true;   // run the verifier after every pass
};

/// Runs the graph-to-graph passes in order; appends one record per pass to `log` if given.
Graph run_pipeline(const Graph& g, const PipelineOptions& opts = {},
                   std::vector<PassRecord>* log = nullptr);

/// The pass names, in order.
const std::vector<std::string>& pipeline_pass_names();

}  // namespace kiln
