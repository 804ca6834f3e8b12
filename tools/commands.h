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
};

int run(const RunOptions& o);
int dump(const DumpOptions& o);
int explain(const ExplainOptions& o);

/// "f32[2,3]"-style list of types: "(f32[2,3], i64[4])".
std::string types_str(const std::vector<std::string>& types);

}  // namespace kiln::cli
