// Dump writer (see dump.h).
#include "frontend/dump.h"

#include <filesystem>
#include <sstream>

#include "codegen/compile.h"
#include "ir/printer.h"
#include "runtime/binary_io.h"

namespace kiln {
namespace fs = std::filesystem;

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
  io::write_file_durable((root / "00_traced.kir").string(), previous);
  for (size_t i = 0; i < r.passes.size(); ++i) {
    const PassRecord& p = r.passes[i];
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
        << a.compile_ms << " ms" << (a.from_disk_cache ? " (disk cache)" : "") << "\n";
    fs::path kd = root / "kernels";
    if (!a.kernel_ir.empty()) io::write_file_durable((kd / (info.name + ".kir")).string(), a.kernel_ir);
    if (!a.llvm_ir.empty()) io::write_file_durable((kd / (info.name + ".ll")).string(), a.llvm_ir);
    if (!a.llvm_ir_opt.empty()) io::write_file_durable((kd / (info.name + ".opt.ll")).string(), a.llvm_ir_opt);
    if (!a.assembly.empty()) io::write_file_durable((kd / (info.name + ".s")).string(), a.assembly);
    if (!a.cuda_source.empty()) io::write_file_durable((kd / (info.name + ".cu")).string(), a.cuda_source);
    if (!a.ptx.empty()) io::write_file_durable((kd / (info.name + ".ptx")).string(), a.ptx);
  }
  io::write_file_durable((root / "summary.txt").string(), sum.str());
  return root.string();
}

}  // namespace kiln
