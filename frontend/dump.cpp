// Dump writer (see dump.h).
#include "frontend/dump.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "codegen/compile.h"
#include "ir/printer.h"

namespace kiln {
namespace fs = std::filesystem;

void write_file_atomic(const std::string& path, const std::string& text) {
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw Error("cannot write " + tmp + " (expected a writable directory)");
  }
  fs::rename(tmp, p, ec);
  if (ec) throw Error("cannot rename " + tmp + " to " + path + ": " + ec.message());
}

namespace {

std::string signature_dir(const std::vector<TensorType>& types) {
  std::string s;
  for (const TensorType& t : types) {
    if (!s.empty()) s += "_";
    std::string ts = t.str();
    for (char c : ts) s += (c == '[' || c == ']' || c == ',' || c == ':') ? (c == ',' ? 'x' : '-') : c;
  }
  if (s.empty()) s = "noargs";
  // Trailing '-' from "]" reads poorly.
  std::string out;
  for (size_t i = 0; i < s.size(); ++i)
    if (!(s[i] == '-' && (i + 1 == s.size() || s[i + 1] == '_'))) out += s[i];
  return out;
}

std::string two_digits(size_t i) { return (i < 10 ? "0" : "") + std::to_string(i); }

}  // namespace

std::string write_dump(const std::string& dir, const std::string& function, const Graph& traced,
                       const CompileReport& r, const std::vector<TensorType>& arg_types) {
  fs::path root = fs::path(dir) / function / signature_dir(arg_types);
  PrintOptions po;
  po.locations = true;
  std::string previous = print_graph(traced, po);
  write_file_atomic((root / "00_traced.kir").string(), previous);
  for (size_t i = 0; i < r.passes.size(); ++i) {
    const PassRecord& p = r.passes[i];
    std::string name = two_digits(i + 1) + "_" + p.name + ".kir";
    std::ostringstream head;
    head << "// pass " << p.name << ": " << (p.changed ? "changed" : "unchanged") << ", " << p.ms
         << " ms\n";
    write_file_atomic((root / name).string(),
                      p.changed ? head.str() + p.graph_text : head.str() + "unchanged\n");
  }
  write_file_atomic((root / "fusion.txt").string(), r.fusion_text);
  if (!r.schedule_text.empty())
    write_file_atomic((root / "collectives.txt").string(), r.schedule_text);
  write_file_atomic((root / "memory.txt").string(), memory_plan_str(r.memory));

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
        << a.compile_ms << " ms" << (a.from_disk_cache ? " (disk cache)" : "") << "\n";
    fs::path kd = root / "kernels";
    if (!a.kernel_ir.empty()) write_file_atomic((kd / (info.name + ".kir")).string(), a.kernel_ir);
    if (!a.llvm_ir.empty()) write_file_atomic((kd / (info.name + ".ll")).string(), a.llvm_ir);
    if (!a.llvm_ir_opt.empty()) write_file_atomic((kd / (info.name + ".opt.ll")).string(), a.llvm_ir_opt);
    if (!a.assembly.empty()) write_file_atomic((kd / (info.name + ".s")).string(), a.assembly);
    if (!a.cuda_source.empty()) write_file_atomic((kd / (info.name + ".cu")).string(), a.cuda_source);
    if (!a.ptx.empty()) write_file_atomic((kd / (info.name + ".ptx")).string(), a.ptx);
  }
  write_file_atomic((root / "summary.txt").string(), sum.str());
  return root.string();
}

}  // namespace kiln
