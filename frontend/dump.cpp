// Dump writer (see dump.h).
#include "frontend/dump.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string_view>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/compile.h"
#include "codegen/cpu_backend.h"
#include "ir/dot.h"
#include "ir/printer.h"
#include "passes/pipeline.h"
#include "runtime/binary_io.h"

extern char** environ;

namespace kiln {
namespace fs = std::filesystem;

namespace {

std::string signature_dir(const std::vector<TensorType>& types) {
  std::string s;
  for (const TensorType& t : types) {
    if (!s.empty()) s += "_";
    std::string ts = t.str();
    for (char c : ts)
      s += (c == '[' || c == ']' || c == ',' || c == ':') ? (c == ',' ? 'x' : '-') : c;
  }
  if (s.empty()) s = "noargs";
  // Trailing '-' from "]" reads poorly.
  std::string out;
  for (size_t i = 0; i < s.size(); ++i)
    if (!(s[i] == '-' && (i + 1 == s.size() || s[i + 1] == '_'))) out += s[i];
  return out;
}

std::string two_digits(size_t i) {
  std::string s = i < 10 ? "0" : "";
  s += std::to_string(i);
  return s;
}

std::string human_bytes(int64_t b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  if (u == 0) return std::to_string(b) + " B";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, unit[u]);
  return buf;
}

std::string human_count(int64_t n) {
  const char* unit[] = {"", "k", "M", "G", "T"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000 && u < 4) v /= 1000, ++u;
  if (u == 0) return std::to_string(n);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%s", v, unit[u]);
  return buf;
}

// Graphviz's `dot` on the PATH, or "".
std::string find_dot() {
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "";
  while (true) {
    const size_t colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/dot";
    if (::access(candidate.c_str(), X_OK) == 0 && fs::is_regular_file(candidate)) return candidate;
    if (colon == std::string_view::npos) return "";
    rest.remove_prefix(colon + 1);
  }
}

}  // namespace

std::string render_svg(const std::string& dot_path, std::string* why, int seconds,
                       const std::string& program) {
  static const std::string found = find_dot();
  const std::string& dot = program.empty() ? found : program;
  if (dot.empty()) {
    *why = "Graphviz's dot is not installed (apt-get install graphviz)";
    return "";
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    *why = "no pipe for dot";
    return "";
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, out[1]);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> args = {dot, "-Tsvg", dot_path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, dot.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  // dot's layout time grows faster than the graph: a dump never waits on it
  // for more than `seconds`.
  std::string svg;
  bool late = false;
  if (rc == 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    char buf[1 << 16];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{out[0], POLLIN, 0};
      const int ready = left.count() > 0 ? ::poll(&p, 1, int(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {
        late = ready == 0;
        ::kill(pid, SIGKILL);
        break;
      }
      const ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      svg.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(out[0]);
  if (rc != 0) {
    *why = "dot did not start";
    return "";
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (late) {
    *why = "dot took more than " + std::to_string(seconds) + " s on " + dot_path;
    return "";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || svg.empty()) {
    *why = "dot failed on " + dot_path;
    return "";
  }
  return svg;
}

std::string write_picture(const std::string& stem, const std::string& dot, size_t nodes) {
  const std::string name = fs::path(stem).filename().string();
  io::write_file_durable(stem + ".dot", dot);
  if (nodes > kMaxRenderedNodes)
    return name + ".dot (no svg: " + std::to_string(nodes) + " nodes, more than " +
           std::to_string(kMaxRenderedNodes) + "; run dot -Tsvg yourself)";
  std::string why;
  const std::string svg = render_svg(stem + ".dot", &why);
  if (svg.empty()) return name + ".dot (no svg: " + why + ")";
  io::write_file_durable(stem + ".svg", svg);
  return name + ".svg";
}

std::string kernels_dot(const CompileReport& r, const std::string& title) {
  DotOptions o;
  o.title = title;
  for (const KernelInfo& k : r.kernels) {
    DotCluster c;
    c.name = k.name;
    c.detail = std::string(group_kind_name(k.kind)) + ": reads " + human_bytes(k.bytes_read) +
               ", writes " + human_bytes(k.bytes_written) + ", " + human_count(k.flops) + " flops";
    c.nodes = k.nodes;
    o.clusters.push_back(std::move(c));
  }
  return graph_dot(r.optimized, o);
}

std::string write_graph_pictures(const std::string& dir, const std::string& title,
                                 const Graph& traced, const CompileReport& r) {
  const fs::path root(dir);
  DotOptions o;
  o.title = title + ": as traced (" + std::to_string(traced.size()) + " nodes)";
  std::string line =
      "pictures: " + write_picture((root / "traced").string(), graph_dot(traced, o), traced.size());
  o.title = title + ": after the passes (" + std::to_string(r.optimized.size()) + " nodes)";
  line += ' ';
  line +=
      write_picture((root / "optimized").string(), graph_dot(r.optimized, o), r.optimized.size());
  const std::string fused_title = title + ": " + std::to_string(r.kernels.size()) + " plan step" +
                                  (r.kernels.size() == 1 ? "" : "s") + ", one box each";
  line += ' ';
  line += write_picture((root / "fused").string(), kernels_dot(r, fused_title), r.optimized.size());
  return line;
}

std::string write_dump(const std::string& dir, const std::string& function, const Graph& traced,
                       const CompileReport& r, const std::vector<TensorType>& arg_types) {
  fs::path root = fs::path(dir) / function / signature_dir(arg_types);
  PrintOptions po;
  po.locations = true;
  std::string previous = print_graph(traced, po);
  io::write_file_durable((root / "00_traced.kir").string(), previous);
  // Numbered by the stage's place in the pipeline, so a file keeps its number
  // when a stage did not run here (a loaded graph was partitioned when traced).
  const std::vector<std::string>& stages = pipeline_pass_names();
  for (const PassRecord& p : r.passes) {
    const size_t i =
        static_cast<size_t>(std::find(stages.begin(), stages.end(), p.name) - stages.begin());
    const std::string name = two_digits(i + 1) + "_" + p.name + (p.graph ? ".kir" : ".txt");
    std::ostringstream head;
    if (p.graph)
      head << "// pass " << p.name << ": " << (p.changed ? "changed" : "unchanged") << ", " << p.ms
           << " ms\n";
    else
      head << "// schedule step " << p.name << ", " << p.ms << " ms\n";
    io::write_file_durable((root / name).string(),
                           p.changed ? head.str() + p.graph_text : head.str() + "unchanged\n");
  }

  std::ostringstream sum;
  sum << "function " << function << "\n";
  sum << "arguments:";
  for (const TensorType& t : arg_types) sum << " " << t.str();
  sum << "\npasses: " << r.pipeline_ms << " ms; codegen: " << r.codegen_ms << " ms; "
      << r.kernels.size() << " steps; target "
      << (r.target.empty() ? cpu_target_description() : r.target) << "\n";
  sum << "memory: " << r.memory.planned_bytes() << " bytes planned for intermediates ("
      << r.memory.naive_bytes << " without reuse)\n\n";
  for (size_t k = 0; k < r.kernels.size(); ++k) {
    const KernelInfo& info = r.kernels[k];
    const KernelArtifacts& a = r.artifacts[k];
    sum << two_digits(k) << " " << info.name << " (" << group_kind_name(info.kind) << ")\n";
    sum << "   nodes:";
    for (NodeId n : info.nodes) sum << " %" << n << "=" << op_name(r.optimized[n].op);
    sum << "\n   source:";
    for (const auto& s : info.sources) sum << " " << s;
    sum << "\n   range " << info.range << ", grain " << info.grain << "; reads " << info.bytes_read
        << " B, writes " << info.bytes_written << " B, " << info.flops << " flops; compile "
        << a.compile_ms << " ms" << (a.from_disk_cache ? " (disk cache)" : "")
        << (a.streaming_stores ? "; nontemporal stores" : "") << "\n";
    fs::path kd = root / "kernels";
    if (!a.kernel_ir.empty())
      io::write_file_durable((kd / (info.name + ".kir")).string(), a.kernel_ir);
    if (!a.llvm_ir.empty()) io::write_file_durable((kd / (info.name + ".ll")).string(), a.llvm_ir);
    if (!a.llvm_ir_opt.empty())
      io::write_file_durable((kd / (info.name + ".opt.ll")).string(), a.llvm_ir_opt);
    if (!a.assembly.empty()) io::write_file_durable((kd / (info.name + ".s")).string(), a.assembly);
    if (!a.cuda_source.empty())
      io::write_file_durable((kd / (info.name + ".cu")).string(), a.cuda_source);
    if (!a.ptx.empty()) io::write_file_durable((kd / (info.name + ".ptx")).string(), a.ptx);
  }
  std::string title = function + "(";
  for (size_t i = 0; i < arg_types.size(); ++i) title += (i ? ", " : "") + arg_types[i].str();
  title += ")";
  sum << "\n" << write_graph_pictures(root.string(), title, traced, r) << "\n";
  io::write_file_durable((root / "summary.txt").string(), sum.str());
  return root.string();
}

}  // namespace kiln
