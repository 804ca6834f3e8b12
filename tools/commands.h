// The `kiln` command line's subcommands (tools/kiln.cpp parses the options).
// Each returns the process exit code and throws kiln::Error on a runtime error.
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

struct RunOptions {
  std::string file;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::string output_dir;
};

struct DumpOptions {
  std::string file;
  std::string dir;
  bool fusion = true;
};

struct ExplainOptions {
  std::string file;
  bool color = true;
  std::string dot_dir;  // non-empty: also write the graph pictures there
};

/// `kiln bench speedup`: the course's matmul experiment and the fused chain.
struct SpeedupOptions {
  bool quick = false;     // a run of under 30 seconds: smaller sizes, fewer repeats
  std::string out = ".";  // where speedup.json and speedup.svg go
  bool progress = true;   // the progress line on stderr
};

int run(const RunOptions& o);
int dump(const DumpOptions& o);
int explain(const ExplainOptions& o);
int bench_speedup(const SpeedupOptions& o);

/// "f32[2,3]"-style list of types: "(f32[2,3], i64[4])".
std::string types_str(const std::vector<std::string>& types);

}  // namespace kiln::cli
