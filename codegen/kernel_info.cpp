// describe_kernel (lower.h): what dumps, `kiln explain` and the executor's
// thread split read about a lowered kernel; and CompileTimes (kernel_info.h).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "codegen/kernel_info.h"
#include "codegen/lower.h"

namespace kiln {
namespace {

// Elements of work per chunk handed to one thread.
constexpr int64_t kGrainElements = 1 << 14;

// Elements of work in one outer iteration (inner loop trip counts, summed).
int64_t work_per_iteration(const std::vector<kir::Stmt>& body) {
  int64_t w = 0;
  for (const kir::Stmt& s : body) {
    if (s.kind == kir::StmtKind::loop) w += s.extent * work_per_iteration(s.body);
    if (s.kind == kir::StmtKind::if_) w += work_per_iteration(s.body);
  }
  return std::max<int64_t>(w, 1);
}

}  // namespace

KernelInfo describe_kernel(const Graph& g, const FusionGroup& group, const kir::Kernel& k) {
  KernelInfo info;
  info.kind = group.kind;
  info.nodes = group.nodes;
  std::string name = "k";
  name += std::to_string(group.nodes.empty() ? 0 : group.nodes[0]);
  name += '_';
  name += group_kind_name(group.kind);
  std::set<std::string> seen_src;
  std::vector<std::string> ops;
  for (NodeId id : group.nodes) {
    const Node& n = g.node(id);
    if (n.loc.known() && seen_src.insert(n.loc.str()).second) info.sources.push_back(n.loc.str());
    if (n.op != OpKind::constant && ops.size() < 3 &&
        std::find(ops.begin(), ops.end(), op_name(n.op)) == ops.end())
      ops.push_back(op_name(n.op));
    const int64_t out = n.results.empty() ? 0 : n.type().numel();
    if (is_elementwise(n.op)) info.flops += out;
    if (op_info(n.op).category == OpCategory::Reduce) info.flops += g.type(n.operands.at(0)).numel();
    if (n.op == OpKind::matmul) {
      const Shape& a = g.type(n.operands.at(0)).shape;
      info.flops += 2 * out * a.back();
    }
  }
  for (const std::string& o : ops) name += "_" + o;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  info.name = name;
  info.range = k.range;
  info.grain = std::max<int64_t>(1, kGrainElements / work_per_iteration(k.body));
  for (const kir::Buffer& b : k.buffers) {
    const int64_t bytes = b.numel() * int64_t(dtype_size(b.dtype));
    (b.output ? info.bytes_written : info.bytes_read) += bytes;
  }
  if (group.kind == GroupKind::Matmul && !group.nodes.empty()) {
    // BLAS reads the operands and writes the product.
    const Node& mm = g.node(group.nodes[0]);
    for (Value v : mm.operands)
      info.bytes_read += g.type(v).numel() * int64_t(dtype_size(g.type(v).dtype));
    info.bytes_written += mm.type().numel() * int64_t(dtype_size(mm.type().dtype));
  }
  return info;
}

CompileTimes& CompileTimes::operator+=(const CompileTimes& o) {
  lower_ms += o.lower_ms;
  irgen_ms += o.irgen_ms;
  optimize_ms += o.optimize_ms;
  machine_code_ms += o.machine_code_ms;
  load_ms += o.load_ms;
  return *this;
}

std::string CompileTimes::str() const {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "lower %.1f ms, LLVM IR %.1f ms, optimise %.1f ms, machine code %.1f ms, load %.1f ms",
                lower_ms, irgen_ms, optimize_ms, machine_code_ms, load_ms);
  return buf;
}

}  // namespace kiln
