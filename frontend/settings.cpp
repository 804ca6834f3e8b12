// Environment switches (see settings.h).
#include "frontend/settings.h"

#include <cstdlib>
#include <string_view>

#include "codegen/compile.h"
#include "frontend/jit.h"
#include "runtime/plan.h"

#include <cstdio>

namespace kiln {
bool log_enabled_in(const std::string& log, const char* category);
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool env_flag(const char* name, bool fallback) {
  std::string v = env(name);
  if (v.empty()) return fallback;
  return !(v == "0" || v == "false" || v == "off" || v == "no");
}

std::string default_cache_dir() {
  std::string v = env("KILN_CACHE_DIR");
  if (!v.empty()) return v == "off" ? "" : v;
  std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/kiln";
  std::string home = env("HOME");
  return home.empty() ? "" : home + "/.cache/kiln";
}

LlvmOpt llvm_opt_from_env() {
  std::string v = env("KILN_OPT");
  if (v == "full") return LlvmOpt::Full;
  if (!v.empty() && v != "fast")
    std::fprintf(stderr, "kiln: KILN_OPT=%s: expected 'fast' or 'full'; using 'fast'\n", v.c_str());
  return LlvmOpt::Fast;
}

ConvAlgo conv_from_env() {
  std::string v = env("KILN_CONV");
  if (v == "im2col") return ConvAlgo::Im2col;
  if (v == "direct") return ConvAlgo::Direct;
  if (!v.empty() && v != "auto")
    std::fprintf(stderr, "kiln: KILN_CONV=%s: expected 'auto', 'im2col' or 'direct'; using 'auto'\n",
                 v.c_str());
  return ConvAlgo::Auto;
}

}  // namespace

Settings& settings() {
  static Settings s = [] {
    Settings s;
    s.jit = env_flag("KILN_JIT", true);
    s.fusion = env_flag("KILN_FUSION", true);
    s.overlap = env_flag("KILN_OVERLAP", true);
    s.check = env_flag("KILN_CHECK", false);
    s.dump_dir = env("KILN_DUMP");
    s.log = env("KILN_LOG");
    s.cache_dir = default_cache_dir();
    s.llvm_opt = llvm_opt_from_env();
    s.reuse_kernels = env_flag("KILN_REUSE", true);
    s.share_sizes = env_flag("KILN_SHARE_SIZES", true);
    s.auto_dynamic = env_flag("KILN_DYNAMIC", true);
    s.background_compile = env_flag("KILN_BACKGROUND", true);
    s.conv = conv_from_env();
    s.eager_kernels = env_flag("KILN_EAGER_KERNELS", true);
    return s;
  }();
  static const bool profiling = [] {
    if (log_enabled_in(s.log, "profile")) {
      set_plan_profiling(true);
      std::atexit([] { std::fputs(plan_profile_report().c_str(), stderr); });
    }
    return true;
  }();
  (void)profiling;
  return s;
}

bool log_enabled(const char* category) { return log_enabled_in(settings().log, category); }

CompileOptions compile_options() {
  const Settings& s = settings();
  CompileOptions o;
  o.fusion = s.fusion;
  o.overlap_collectives = s.overlap;
  o.cache_dir = s.cache_dir;
  o.llvm_opt = s.llvm_opt;
  o.reuse_kernels = s.reuse_kernels;
  o.share_sizes = s.share_sizes;
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
