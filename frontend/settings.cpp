// Environment switches (see settings.h).
#include "frontend/settings.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <string_view>

#include <unistd.h>

#include "codegen/compile.h"
#include "codegen/cpu_backend.h"
#include "frontend/jit.h"
#include "runtime/env.h"
#include "runtime/plan.h"
#include "runtime/profile.h"

namespace kiln {
bool log_enabled_in(const std::string& log, const char* category);
namespace {

std::string env_str(const char* name) {
  return env::get(name).value_or("");
}

std::string default_cache_dir() {
  std::string v = env_str("KILN_CACHE_DIR");
  if (!v.empty()) return v == "off" ? "" : v;
  std::string xdg = env_str("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/kiln";
  std::string home = env_str("HOME");
  return home.empty() ? "" : home + "/.cache/kiln";
}

// The categories KILN_LOG takes; "all" turns on every one.
constexpr const char* kLogCategories[] = {"recompiles", "compile", "profile", "distributed", "all"};

std::string log_from_env() {
  const std::string v = env_str("KILN_LOG");
  std::string_view rest = v;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view c = rest.substr(0, comma);
    if (std::find(std::begin(kLogCategories), std::end(kLogCategories), c) ==
        std::end(kLogCategories))
      throw Error("KILN_LOG=" + v + ": unknown category '" + std::string(c) +
                  "' (expected a comma-separated list of recompiles, compile, profile, "
                  "distributed or all)");
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return v;
}

}  // namespace

Settings& settings() {
  static Settings s = [] {
    Settings s;
    s.jit = env::flag("KILN_JIT", true);
    s.fusion = env::flag("KILN_FUSION", true);
    s.overlap = env::flag("KILN_OVERLAP", true);
    s.check = env::flag("KILN_CHECK", false);
    s.dump_dir = env_str("KILN_DUMP");
    s.log = log_from_env();
    s.cache_dir = default_cache_dir();
    s.llvm_opt = env::choice("KILN_OPT", {"fast", "full"}, 0) == 1 ? LlvmOpt::Full : LlvmOpt::Fast;
    constexpr CodeTier kTier[] = {CodeTier::Tiered, CodeTier::Quick, CodeTier::Optimised};
    s.tier = kTier[env::choice("KILN_TIER", {"tiered", "0", "1"}, 0)];
    s.reuse_kernels = env::flag("KILN_REUSE", true);
    s.share_sizes = env::flag("KILN_SHARE_SIZES", true);
    s.merge_steps = env::flag("KILN_MERGE_STEPS", true);
    s.auto_dynamic = env::flag("KILN_DYNAMIC", true);
    s.background_compile = env::flag("KILN_BACKGROUND", true);
    s.compile_after = static_cast<int>(env::integer("KILN_COMPILE_AFTER", 0, 1000, 1));
    constexpr ConvAlgo kConv[] = {ConvAlgo::Auto, ConvAlgo::Im2col, ConvAlgo::Direct};
    s.conv = kConv[env::choice("KILN_CONV", {"auto", "im2col", "direct"}, 0)];
    s.eager_kernels = env::flag("KILN_EAGER_KERNELS", true);
    s.warm_up = env::flag("KILN_WARM_UP", true);
    s.stream_min_bytes = env::flag("KILN_NT_STORES", true) ? host_last_level_cache_bytes() : 0;
    return s;
  }();
  static const bool profiling = [] {
    if (log_enabled_in(s.log, "profile")) {
      set_plan_profiling(true);
      std::atexit([] {
        std::fputs(plan_profile_report().c_str(), stderr);
        std::fputs(write_profile_trace().c_str(), stderr);
      });
    }
    return true;
  }();
  (void)profiling;
  return s;
}

std::string write_profile_trace() {
  const std::vector<TraceEvent> events = trace_events();
  const std::string dir = settings().dump_dir.empty() ? "." : settings().dump_dir;
  const std::string path =
      (std::filesystem::absolute(dir) / ("kiln-profile-" + std::to_string(::getpid()) + ".json"))
          .lexically_normal()
          .string();
  try {
    write_chrome_trace(path, events);
  } catch (const std::exception& e) {
    return std::string("kiln profile: the trace was not written: ") + e.what() + "\n";
  }
  std::string dropped;
  if (trace_dropped() > 0)
    dropped = " (the first " + std::to_string(kMaxTraceEvents) + " events; " +
              std::to_string(trace_dropped()) + " more were not kept)";
  return "kiln profile: trace of " + std::to_string(count_steps(events)) + " plan steps" + dropped +
         " written to " + path + "; open it at https://ui.perfetto.dev or chrome://tracing\n";
}

bool log_enabled(const char* category) { return log_enabled_in(settings().log, category); }

CompileOptions compile_options() {
  const Settings& s = settings();
  CompileOptions o;
  o.fusion = s.fusion;
  o.overlap_collectives = s.overlap;
  o.cache_dir = s.cache_dir;
  CpuOptions cpu;
  cpu.llvm_opt = s.llvm_opt;
  cpu.tier = s.tier;
  cpu.reuse_kernels = s.reuse_kernels;
  cpu.share_sizes = s.share_sizes;
  cpu.merge_steps = s.merge_steps;
  cpu.stream_min_bytes = s.stream_min_bytes;
  o.set_backend_options(cpu);
  return o;
}

bool log_enabled_in(const std::string& l, const char* category) {
  if (l.empty()) return false;
  if (l == "all") return true;
  std::string_view rest = l;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    if (rest.substr(0, comma) == category) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

void set_jit_enabled(bool on) { settings().jit = on; }
bool jit_enabled() { return settings().jit; }
void set_fusion_enabled(bool on) { settings().fusion = on; }
bool fusion_enabled() { return settings().fusion; }
void set_check_enabled(bool on) { settings().check = on; }
bool check_enabled() { return settings().check; }
void set_cache_dir(std::string dir) { settings().cache_dir = dir == "off" ? "" : std::move(dir); }
std::string cache_dir() { return settings().cache_dir; }

}  // namespace kiln
