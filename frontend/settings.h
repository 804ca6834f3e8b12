// Kiln's switches, read once from the environment; the API setters override.
//   KILN_JIT=0         run traced functions eagerly (debugging)
//   KILN_FUSION=0      one kernel per op (the unfused baseline)
//   KILN_OVERLAP=0     collectives do not overlap computation (the baseline of the overlap)
//   KILN_CHECK=1       on each new signature, also run eagerly and compare
//   KILN_DUMP=dir      write dumps of every compiled function under dir
//   KILN_LOG=a,b       log categories to stderr: recompiles, compile, profile, all
//   KILN_CACHE_DIR=d   on-disk kernel cache ("off" disables)
#pragma once

#include <string>

namespace kiln {

struct Settings {
  bool jit = true;
  bool fusion = true;
  bool overlap = true;  // KILN_OVERLAP=0: collectives start only where they are waited for
  bool check = false;
  std::string dump_dir;
  std::string log;
  std::string cache_dir;
};

/// The process-wide settings (initialised from the environment on first use).
Settings& settings();
/// True when KILN_LOG names the category (or "all").
bool log_enabled(const char* category);

}  // namespace kiln
