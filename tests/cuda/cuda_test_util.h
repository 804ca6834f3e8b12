// Shared helpers for the CUDA backend tests: a batch of generated kernels
// compiled together (one NVRTC run per architecture and one host compiler run
// per test case, since each costs far more than a kernel), then each kernel
// run under host emulation and compared with the reference kernels.
#pragma once

#include <doctest/doctest.h>

#include <deque>
#include <future>
#include <memory>

#include "codegen/codegen_test_util.h"
#include "codegen/cuda_backend.h"
#include "codegen/cuda_emulation.h"

namespace kiln::test {

/// One kernel to check: the group, the reference values of every node, tolerance.
struct CudaCheck {
  std::shared_ptr<const Graph> g;
  FusionGroup grp;
  std::vector<Buf> vals;
  Tolerance tol;
  CudaKernelSource k;
  std::string label;
};

/// Sources concatenated into one translation unit, each distinct source once.
inline std::string concat_sources(const std::vector<std::string>& sources) {
  std::string tu;
  std::set<std::string> seen;
  for (const std::string& s : sources)
    if (seen.insert(s).second) tu += s + "\n";
  return tu;
}

/// Runs a kernel under emulation: inputs from `vals` (by node), fresh poisoned
/// outputs. Splits [0, range) into two launches at `split` (a fraction) when >= 0.
inline std::map<std::pair<NodeId, uint32_t>, Buf> emulate(const CudaHostModule& m,
                                                          const CudaCheck& c, double split,
                                                          int max_grid) {
  std::map<std::pair<NodeId, uint32_t>, Buf> outs;
  std::set<std::pair<NodeId, uint32_t>> is_out;
  for (Value v : c.grp.outputs) is_out.insert({v.node, v.index});
  std::vector<void*> ptrs;
  for (size_t i = 0; i < c.k.buffers.size(); ++i) {
    const Value v = c.k.buffers[i];
    const bool matmul_result = c.grp.kind == GroupKind::Matmul && i == 0;
    if (is_out.count({v.node, v.index}) && !matmul_result) {
      Buf b = make_buf(c.g->type(v));
      std::memset(b.data(), 0x7f, b.storage->bytes());
      outs[{v.node, v.index}] = b;
      ptrs.push_back(b.data());
    } else {
      ptrs.push_back(c.vals.at(v.node).data());
    }
  }
  const int64_t range = c.k.launch.range;
  if (split >= 0) {
    const int64_t mid = std::min<int64_t>(range, int64_t(double(range) * split));
    m.launch(c.k, ptrs.data(), 0, mid, max_grid);
    m.launch(c.k, ptrs.data(), mid, range, max_grid);
  } else {
    m.launch(c.k, ptrs.data(), 0, range, max_grid);
  }
  return outs;
}

/// Kernels generated one by one, compiled and checked together.
class CudaBatch {
 public:
  explicit CudaBatch(CudaCodegenOptions opts = {}) : opts_(opts) {}

  /// Generates CUDA C for `grp` of `g`; `vals` are the reference values per node.
  const CudaKernelSource& add(std::shared_ptr<const Graph> g, FusionGroup grp,
                              std::vector<Buf> vals, Tolerance tol = {}, std::string label = {},
                              const CudaCodegenOptions* opts = nullptr) {
    CudaCheck c{std::move(g), std::move(grp), std::move(vals), tol, {}, std::move(label)};
    c.k = generate_cuda_kernel(*c.g, c.grp, opts ? *opts : opts_);
    checks_.push_back(std::move(c));
    return checks_.back().k;
  }

  /// As check_whole_graph: random args (seeded), reference values, every compute
  /// node of g in one group of `kind`.
  const CudaKernelSource& add_graph(Graph graph, GroupKind kind, uint64_t seed,
                                    const std::vector<Range>& ranges = {}, Tolerance tol = {},
                                    std::string label = {},
                                    const CudaCodegenOptions* opts = nullptr) {
    auto g = std::make_shared<const Graph>(std::move(graph));
    std::mt19937_64 rng(seed);
    std::vector<Buf> args;
    for (NodeId id : g->args()) {
      Buf b = make_buf(g->node(id).type());
      const size_t i = args.size();
      fill_random(b, rng, i < ranges.size() ? ranges[i] : Range{});
      args.push_back(b);
    }
    std::vector<Buf> vals = reference_eval(*g, args);
    FusionGroup grp = make_group(*g, kind, all_compute_nodes(*g));
    return add(g, std::move(grp), std::move(vals), tol, std::move(label), opts);
  }

  /// NVRTC (PTX for sm_80 and sm_90, a cubin for sm_80: ptxas accepts it) and the
  /// host compiler, concurrently; then every kernel emulated twice (whole range
  /// with one block per row; split in two with at most 3 blocks, so blocks
  /// stride over rows) and compared with the reference.
  void run() {
    std::vector<std::string> sources;
    for (const CudaCheck& c : checks_)
      if (c.k.needs_kernel) sources.push_back(c.k.source);
    if (sources.empty()) return;
    const std::string tu = concat_sources(sources);
    const bool nvrtc = !nvrtc_version().empty();  // else a build without the CUDA toolkit
    std::string first;  // the translation unit's first kernel names it
    for (const CudaCheck& c : checks_)
      if (c.k.needs_kernel && first.empty()) first = c.k.name;
    auto compile = [&](int arch, bool cubin) {
      return std::async(std::launch::async, [&tu, &first, arch, cubin, nvrtc] {
        return nvrtc ? nvrtc_compile(tu, first, arch, cubin) : CudaBinary{};
      });
    };
    auto sm80 = compile(80, true);
    auto sm90 = compile(90, false);
    CudaHostModule m(sources);
    for (CudaBinary bin : {sm80.get(), sm90.get()}) {
      if (!nvrtc) break;
      CAPTURE(bin.arch);
      CHECK(bin.ptx.find(".target sm_" + std::to_string(bin.arch)) != std::string::npos);
      CHECK(bin.cubin.empty() == (bin.arch != 80));
      CHECK_MESSAGE(bin.log.empty(), bin.log);
      for (const CudaCheck& c : checks_) {
        if (!c.k.needs_kernel) continue;
        INFO(c.label);
        CHECK(bin.ptx.find(".entry " + c.k.name) != std::string::npos);
      }
    }
    for (const CudaCheck& c : checks_) {
      if (!c.k.needs_kernel) continue;
      INFO(c.label);
      INFO(c.k.source);
      REQUIRE(m.has_kernel(c.k.name));
      for (double split : {-1.0, 0.37}) {
        CAPTURE(split);
        auto outs = emulate(m, c, split, split < 0 ? 1 << 20 : 3);
        for (auto& [key, buf] : outs) {
          CAPTURE(key.first);
          CHECK(all_close(buf.view(), c.vals.at(key.first).view(), c.tol));
        }
      }
    }
  }

 private:
  CudaCodegenOptions opts_;
  std::deque<CudaCheck> checks_;  // a deque: add() hands out references
};

}  // namespace kiln::test
