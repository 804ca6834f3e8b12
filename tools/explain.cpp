// `kiln explain`: what the pass pipeline did to a saved graph (node counts
// before and after each pass) and the kernels it became, fused and unfused,
// with the bytes each moves and the flops it does; with --dot DIR, the graph
// pictures of a dump (frontend/dump.h) and unfused.dot beside them.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "codegen/compile.h"
#include "frontend/dump.h"
#include "frontend/jit.h"
#include "frontend/serialize.h"
#include "frontend/settings.h"
#include "ir/parser.h"
#include "passes/pipeline.h"
#include "tools/commands.h"

namespace kiln::cli {
namespace {

struct Style {
  bool on = false;
  std::string bold(const std::string& s) const { return on ? "\033[1m" + s + "\033[0m" : s; }
  std::string green(const std::string& s) const { return on ? "\033[32m" + s + "\033[0m" : s; }
  std::string dim(const std::string& s) const { return on ? "\033[2m" + s + "\033[0m" : s; }
};

// Printed width of a cell (colour escapes take no room).
size_t visible(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\033') {
      while (i < s.size() && s[i] != 'm') ++i;
    } else {
      ++n;
    }
  }
  return n;
}

// Rows of cells printed in aligned columns; columns after the first two are right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> head) : rows_{std::move(head)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& os, const Style& st, size_t left_cols = 2) const {
    std::vector<size_t> w;
    for (const auto& r : rows_)
      for (size_t c = 0; c < r.size(); ++c) {
        if (w.size() <= c) w.push_back(0);
        w[c] = std::max(w[c], visible(r[c]));
      }
    for (size_t i = 0; i < rows_.size(); ++i) {
      std::string line = "  ";
      for (size_t c = 0; c < rows_[i].size(); ++c) {
        const std::string& cell = rows_[i][c];
        std::string pad(w[c] - visible(cell), ' ');
        line += c < left_cols ? cell + pad : pad + cell;
        if (c + 1 < rows_[i].size()) line += "  ";
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      os << (i == 0 ? st.dim(line) : line) << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string human_bytes(int64_t b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? std::to_string(b) + " B" : fixed(v, 1) + " " + unit[u];
}

std::string human_count(int64_t n) {
  const char* unit[] = {"", "k", "M", "G", "T"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000 && u < 4) v /= 1000, ++u;
  return u == 0 ? std::to_string(n) : fixed(v, 1) + unit[u];
}

std::string ratio(double unfused, double fused) {
  if (fused <= 0) return unfused <= 0 ? "1.00x" : "-";
  return fixed(unfused / fused, 2) + "x";
}

// Nodes in a pass's printed graph (parsed; line count if the text does not parse).
size_t node_count(const std::string& text) {
  try {
    return parse_graph(text, "pass").size();
  } catch (const Error&) {
    size_t n = 0;
    std::istringstream is(text);
    for (std::string line; std::getline(is, line);) n += line.starts_with("%");
    return n;
  }
}

struct Compiled {
  CompileReport report;
  int64_t bytes = 0, flops = 0;
};

Compiled compile(const Graph& g, bool fusion) {
  Compiled c;
  CompileOptions opts = compile_options();
  opts.fusion = fusion;
  compile_graph(g, opts, &c.report);
  for (const KernelInfo& k : c.report.kernels) {
    c.bytes += k.bytes_read + k.bytes_written;
    c.flops += k.flops;
  }
  return c;
}

void print_kernels(std::ostream& os, const Style& st, const std::string& title, const Compiled& c) {
  os << "\n" << st.bold(title) << " (" << c.report.kernels.size() << " kernels)\n";
  Table t({"#", "kernel", "kind", "nodes", "bytes moved", "flops"});
  for (size_t i = 0; i < c.report.kernels.size(); ++i) {
    const KernelInfo& k = c.report.kernels[i];
    t.add({std::to_string(i), k.name, group_kind_name(k.kind), std::to_string(k.nodes.size()),
           human_bytes(k.bytes_read + k.bytes_written), human_count(k.flops)});
  }
  t.print(os, st, 3);
}

}  // namespace

int explain(const ExplainOptions& o) {
  Style st{o.color};
  SavedGraph sg = load_graph(o.file);
  const Graph& g = sg.graph;
  std::string name = sg.name.empty() ? std::filesystem::path(o.file).stem().string() : sg.name;
  std::vector<std::string> args, outs;
  for (NodeId id : g.args()) args.push_back(g[id].type().str());
  for (Value v : g.outputs) outs.push_back(g.type(v).str());
  std::ostream& os = std::cout;
  os << st.bold(name) << " (" << o.file << "): " << g.size() << " nodes, arguments "
     << types_str(args) << ", " << g.params().size() << " parameters, outputs " << types_str(outs);
  if (!g.updates.empty()) os << ", " << g.updates.size() << " parameter updates";
  os << "\n";

  PipelineOptions popts;
  popts.record = true;
  std::vector<PassRecord> log;
  optimize_graph(g, popts, &log);
  os << "\n" << st.bold("passes") << " (nodes before -> after)\n";
  Table pt({"pass", "", "before", "after", "time"});
  size_t before = g.size();
  for (const PassRecord& p : log) {
    size_t after = p.changed ? node_count(p.graph_text) : before;
    pt.add({p.name, p.changed ? "changed" : st.dim("unchanged"), std::to_string(before),
            std::to_string(after), fixed(p.ms, 3) + " ms"});
    before = after;
  }
  pt.print(os, st);

  Compiled fused = compile(g, true), unfused = compile(g, false);
  print_kernels(os, st, "fused kernels", fused);
  print_kernels(os, st, "unfused kernels", unfused);

  os << "\n" << st.bold("totals") << "\n";
  Table tt({"", "fused", "unfused", "unfused/fused"});
  auto nk = [](const Compiled& c) { return static_cast<int64_t>(c.report.kernels.size()); };
  tt.add({"kernels", st.green(std::to_string(nk(fused))), std::to_string(nk(unfused)),
          ratio(static_cast<double>(nk(unfused)), static_cast<double>(nk(fused)))});
  tt.add({"bytes moved", st.green(human_bytes(fused.bytes)), human_bytes(unfused.bytes),
          ratio(static_cast<double>(unfused.bytes), static_cast<double>(fused.bytes))});
  tt.add({"flops", human_count(fused.flops), human_count(unfused.flops),
          ratio(static_cast<double>(unfused.flops), static_cast<double>(fused.flops))});
  tt.add({"intermediates", human_bytes(fused.report.memory.planned_bytes()),
          human_bytes(unfused.report.memory.planned_bytes()),
          ratio(static_cast<double>(unfused.report.memory.planned_bytes()),
                static_cast<double>(fused.report.memory.planned_bytes()))});
  tt.print(os, st, 1);

  if (!o.dot_dir.empty()) {
    std::string line = write_graph_pictures(o.dot_dir, name, g, fused.report);
    const std::string title =
        name + ", fusion off: " + std::to_string(unfused.report.kernels.size()) + " plan steps";
    line += ' ';
    line += write_picture((std::filesystem::path(o.dot_dir) / "unfused").string(),
                          kernels_dot(unfused.report, title), unfused.report.optimized.size());
    os << "\n" << line << "\n  in " << o.dot_dir << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
