// The fuzzer's mutation mode: valid IR texts and saved-graph files, made by
// the library from random programs, are damaged at random (bit flips,
// truncation, duplicated or deleted lines and tokens, numbers replaced with
// huge, negative or NaN values) and fed to parse_graph / load in-process.
// A kiln::Error is the right answer; any other exception, a crash or a run
// past the per-input time limit is a failure, printed with the input.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace kiln::fuzz {

enum class MutationTarget { ir_text, saved_graph };

struct MutationOptions {
  MutationTarget target = MutationTarget::ir_text;
  int64_t inputs = 100;  // mutated inputs to try
  uint64_t seed = 1;
  double time_limit_s = 20;  // per input; past it the process reports and exits
  bool verbose = false;
  // Parsed IR whose arg or param indices are not 0..n-1 is not run (a known
  // crash: parse_graph accepts such graphs and running them segfaults).
  bool skip_sparse_indices = false;
  std::string work_dir = ".";  // where saved-graph inputs are written
};

struct MutationSummary {
  int64_t inputs = 0, rejected = 0, accepted = 0, ran = 0, failed = 0;
};

/// Runs the mutation mode; failures are printed to `out` with their input.
MutationSummary run_mutations(const MutationOptions& o, std::ostream& out);

/// Feeds one file as the mutation mode would (a saved graph if it starts with
/// the saved-graph magic, else IR text), to reproduce a reported failure.
MutationSummary replay_input(const std::string& file, const MutationOptions& o, std::ostream& out);

}  // namespace kiln::fuzz
