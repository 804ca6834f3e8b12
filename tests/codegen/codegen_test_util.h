// Shared helpers for the codegen tests: fusion groups built by hand, random
// inputs, a node-by-node reference evaluation (the reference kernels), running
// a compiled kernel over dense buffers, and an allclose check.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "codegen/cpu_backend.h"
#include "codegen/kernel_ir.h"
#include "codegen/lower.h"
#include "ir/builder.h"
#include "ir/parser.h"
#include "passes/fusion.h"
#include "runtime/reference.h"
#include "runtime/storage.h"

namespace kiln::test {

inline TensorType ty(DType t, Shape s) {
  return TensorType{t, std::move(s), {}};
}

/// A group of `nodes` (in topological order) of kind `kind`, with inputs and
/// outputs computed as plan_fusion does: inputs are operands from outside, in
/// first-use order; outputs are member values used outside or returned.
inline FusionGroup make_group(const Graph& g, GroupKind kind, std::vector<NodeId> nodes) {
  FusionGroup grp;
  grp.kind = kind;
  grp.nodes = nodes;
  std::set<NodeId> in(nodes.begin(), nodes.end());
  std::set<std::pair<NodeId, uint32_t>> seen_in, seen_out;
  for (NodeId id : nodes) {
    for (Value v : g.node(id).operands) {
      if (in.count(v.node) || !seen_in.insert({v.node, v.index}).second) continue;
      grp.inputs.push_back(v);
    }
  }
  auto add_out = [&](Value v) {
    if (in.count(v.node) && seen_out.insert({v.node, v.index}).second) grp.outputs.push_back(v);
  };
  for (NodeId id = 0; id < g.size(); ++id) {
    if (in.count(id)) continue;
    for (Value v : g.node(id).operands) add_out(v);
  }
  for (Value v : g.outputs) add_out(v);
  // Keep outputs in node order for predictability.
  std::sort(grp.outputs.begin(), grp.outputs.end(), [](Value a, Value b) {
    return a.node < b.node || (a.node == b.node && a.index < b.index);
  });
  return grp;
}

/// Every non-input node of g, in order.
inline std::vector<NodeId> all_compute_nodes(const Graph& g) {
  std::vector<NodeId> ids;
  for (NodeId id = 0; id < g.size(); ++id)
    if (op_info(g.node(id).op).category != OpCategory::Input) ids.push_back(id);
  return ids;
}

/// A dense, 64-byte aligned buffer of one value's type.
struct Buf {
  std::shared_ptr<Storage> storage;
  TensorType type;
  View view() const { return dense_view(storage->data(), type.dtype, type.shape); }
  void* data() const { return storage->data(); }
};

inline Buf make_buf(const TensorType& t) {
  Buf b;
  b.type = t;
  b.storage = Storage::allocate(std::max<size_t>(1, size_t(t.numel()) * dtype_size(t.dtype)));
  std::memset(b.storage->data(), 0, b.storage->bytes());
  return b;
}

/// Value ranges for random inputs.
struct Range {
  double lo = -3, hi = 3;
};

/// Random contents: floats uniform in [lo, hi]; integers uniform in [lo, hi]; bools fair.
inline void fill_random(Buf& b, std::mt19937_64& rng, Range r = {}) {
  std::uniform_real_distribution<double> u(r.lo, r.hi);
  visit_dtype(b.type.dtype, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(b.data());
    for (int64_t i = 0; i < b.type.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = (rng() & 1) != 0;
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>(std::llround(std::floor(u(rng) + 0.5)));
      } else {
        p[i] = static_cast<T>(u(rng));
      }
    }
  });
}

/// Every node's value by the reference kernels (inputs from `args`, by arg index).
inline std::vector<Buf> reference_eval(const Graph& g, const std::vector<Buf>& args,
                                       const std::vector<Buf>& params = {}) {
  std::vector<Buf> vals(g.size());
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpKind::arg || n.op == OpKind::param) {
      vals[id] = (n.op == OpKind::arg ? args : params).at(size_t(n.attrs.i(AttrKey::index)));
      continue;
    }
    REQUIRE(op_info(n.op).category != OpCategory::Input);
    vals[id] = make_buf(n.type());
    std::vector<View> ins;
    for (Value v : n.operands) ins.push_back(vals[v.node].view());
    reference_kernel(n.op, n.attrs, ins, vals[id].view());
  }
  return vals;
}

/// Runs a compiled kernel: inputs from `vals` (by node), fresh outputs; splits the
/// range at `split` (a fraction of it) into two calls when given.
inline std::map<std::pair<NodeId, uint32_t>, Buf> run_kernel(const Graph& g, const CpuKernel& k,
                                                             const std::vector<Buf>& vals,
                                                             const FusionGroup& grp,
                                                             double split = -1) {
  std::map<std::pair<NodeId, uint32_t>, Buf> outs;
  std::set<std::pair<NodeId, uint32_t>> is_out;
  for (Value v : grp.outputs) is_out.insert({v.node, v.index});
  std::vector<void*> ptrs;
  for (size_t i = 0; i < k.buffers.size(); ++i) {
    const Value v = k.buffers[i];
    const bool matmul_result = grp.kind == GroupKind::Matmul && i == 0;
    if (is_out.count({v.node, v.index}) && !matmul_result) {
      Buf b = make_buf(g.type(v));
      // Poison the output so unwritten elements show up.
      std::memset(b.data(), 0x7f, b.storage->bytes());
      outs[{v.node, v.index}] = b;
      ptrs.push_back(b.data());
    } else {
      ptrs.push_back(vals.at(v.node).data());
    }
  }
  ptrs.push_back(const_cast<int64_t*>(k.params.data()));  // a kernel template's parameters
  REQUIRE(static_cast<bool>(k.fn));
  const int64_t range = k.info.range;
  if (split >= 0) {
    const int64_t mid = std::min<int64_t>(range, int64_t(double(range) * split));
    k.fn(ptrs.data(), 0, mid);
    k.fn(ptrs.data(), mid, range);
  } else {
    k.fn(ptrs.data(), 0, range);
  }
  return outs;
}

struct Tolerance {
  double rtol = -1, atol = -1;  // <0: by dtype
};

/// Element-wise |got - want| <= atol + rtol |want| (NaN matches NaN, infinities must
/// match); exact for integers and bools. Reports the first mismatches.
inline bool all_close(const View& got, const View& want, Tolerance tol = {}) {
  REQUIRE(got.dtype == want.dtype);
  REQUIRE(got.numel() == want.numel());
  const bool f32 = got.dtype == DType::f32;
  const double rtol = tol.rtol >= 0 ? tol.rtol : f32 ? 1e-5 : 1e-12;
  const double atol = tol.atol >= 0 ? tol.atol : f32 ? 1e-6 : 1e-13;
  int bad = 0;
  visit_dtype(got.dtype, [&](auto t) {
    using T = decltype(t);
    const T* a = static_cast<const T*>(got.data);
    const T* b = static_cast<const T*>(want.data);
    for (int64_t i = 0; i < got.numel(); ++i) {
      bool ok;
      if constexpr (std::is_floating_point_v<T>) {
        const double x = a[i], y = b[i];
        if (std::isnan(y))
          ok = std::isnan(x);
        else if (std::isinf(y))
          ok = x == y;
        else
          ok = std::abs(x - y) <= atol + rtol * std::abs(y);
      } else {
        ok = a[i] == b[i];
      }
      if (!ok && bad++ < 5) {
        MESSAGE("element " << i << ": got " << double(a[i]) << ", want " << double(b[i]));
      }
    }
  });
  if (bad) MESSAGE(bad << " of " << got.numel() << " elements differ");
  return bad == 0;
}

/// Compiles `grp`, runs it on `vals` (the reference's node values) and compares
/// every output with the reference. Returns the kernel for further checks.
inline CpuKernel check_group(const Graph& g, const FusionGroup& grp, const std::vector<Buf>& vals,
                             Tolerance tol = {}, const CpuCompileOptions& opts = {}) {
  CpuKernel k = compile_cpu_kernel(g, grp, opts);
  for (double split : {-1.0, 0.37}) {
    auto outs = run_kernel(g, k, vals, grp, split);
    for (auto& [key, buf] : outs) {
      CAPTURE(key.first);
      CAPTURE(split);
      CHECK(all_close(buf.view(), vals.at(key.first).view(), tol));
    }
  }
  return k;
}

/// Builds the graph, evaluates it with the reference kernels on random args and
/// checks the group made of every compute node.
inline CpuKernel check_whole_graph(const Graph& g, GroupKind kind, uint64_t seed,
                                   const std::vector<Range>& ranges = {}, Tolerance tol = {}) {
  std::mt19937_64 rng(seed);
  std::vector<Buf> args;
  for (NodeId id : g.args()) {
    Buf b = make_buf(g.node(id).type());
    const size_t i = args.size();
    fill_random(b, rng, i < ranges.size() ? ranges[i] : Range{});
    args.push_back(b);
  }
  std::vector<Buf> vals = reference_eval(g, args);
  FusionGroup grp = make_group(g, kind, all_compute_nodes(g));
  return check_group(g, grp, vals, tol);
}

// ---- single-op test cases shared by the CPU and CUDA op tests ----

/// Operand i's input range for op k: ops.def's `domain` column.
inline Range domain_range(OpKind k, size_t i = 0) {
  const Domain& d = op_info(k).domain;
  return {d.low(i), d.high(i)};
}
/// Every operand's range for op k.
inline std::vector<Range> domain_ranges(OpKind k) {
  std::vector<Range> r;
  for (size_t i = 0; i < static_cast<size_t>(std::max(op_info(k).arity, 1)); ++i) r.push_back(domain_range(k, i));
  return r;
}
/// An integer operand's range for op k: its domain, with a positive one from 1
/// (an integer in (0, 1) is 0, outside a domain such as log's).
inline Range integer_domain_range(OpKind k, size_t i = 0) {
  Range r = domain_range(k, i);
  if (r.lo > 0) r.lo = std::max(r.lo, 1.0), r.hi = std::max(r.hi, r.lo + 1);
  return r;
}

/// A graph computing op k on one argument.
inline Graph unary_graph(OpKind k, DType in, const Shape& s, Attrs attrs = {}) {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(in, s));
  g.outputs = {b.op(k, {x}, attrs)};
  return g;
}

/// A graph computing op k on two arguments.
inline Graph binary_graph(OpKind k, DType da, const Shape& sa, DType db, const Shape& sb) {
  Graph g;
  Builder b(g);
  Value x = b.arg(0, ty(da, sa));
  Value y = b.arg(1, ty(db, sb));
  g.outputs = {b.op(k, {x, y})};
  return g;
}

/// Every kind of philox draw from a key argument and a counter argument of n
/// elements: f32, f64, all 64 bits, and integers in ranges small, wide (a
/// quarter of first attempts rejected) and whole. Compiled kernels must give
/// the reference's bits exactly (Tolerance{0, 0}). Args: the key, then counters.
inline Graph philox_graph(int64_t n) {
  Graph g;
  Builder b(g);
  Value key = b.arg(0, ty(DType::i64, {}));
  Value counter = b.arg(1, ty(DType::i64, {n}));
  auto draw = [&](Attrs a) { return b.op(OpKind::philox, {key, counter}, std::move(a)); };
  auto ints = [&](int64_t low, int64_t high) {
    return draw({{AttrKey::dtype, DType::i64}, {AttrKey::low, low}, {AttrKey::high, high}});
  };
  g.outputs = {draw({}),
               draw({{AttrKey::dtype, DType::f64}}),
               draw({{AttrKey::dtype, DType::i64}}),
               ints(-3, 4),
               ints(INT64_MIN, int64_t(1) << 62),
               ints(INT64_MIN, INT64_MAX),
               ints(int64_t(1) << 40, (int64_t(1) << 40) + 1000003)};
  return g;
}
/// Value ranges for philox_graph's arguments: any key, counters of either sign.
inline const std::vector<Range> kPhiloxRanges = {{-1e18, 1e18}, {-1e15, 1e15}};

/// The kernel IR text of the group of every compute node of `g`.
inline std::string lowered(const Graph& g, GroupKind kind) {
  return kir::print_kernel(lower_group(g, make_group(g, kind, all_compute_nodes(g))),
                           {.names = false});
}
/// The same for graph text `ir`.
inline std::string lowered(std::string_view ir, GroupKind kind) {
  return lowered(parse_graph(ir), kind);
}

/// Whether printed kernel IR divides or takes a remainder anywhere in `text`.
inline bool divides(const std::string& text) {
  return text.find("idiv") != std::string::npos || text.find("imod") != std::string::npos;
}

/// How many times `needle` occurs in `text`.
inline int occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

/// The extents of printed kernel IR's `for` loops, in order.
inline std::vector<int64_t> loop_extents(const std::string& text) {
  std::vector<int64_t> extents;
  const std::regex loop(R"(for i\d+ in \[0, (\d+)\))");
  for (auto m = std::sregex_iterator(text.begin(), text.end(), loop); m != std::sregex_iterator();
       ++m)
    extents.push_back(std::stoll((*m)[1]));
  return extents;
}

/// A conv's k x k taps of n images [h, w] padded by `low` before and k - 1 -
/// low after on both dims, each tap times its own constant, plus a row
/// broadcast: the images [n, h, w] as they are, or read through a reshape of
/// [n, h w].
inline Graph padded_taps(DType dt, int64_t n, int64_t h, int64_t w, int64_t k, int64_t low,
                         bool reshaped) {
  Graph g;
  Builder b(g);
  Value x =
      reshaped ? b.reshape(b.arg(0, ty(dt, {n, h * w})), {n, h, w}) : b.arg(0, ty(dt, {n, h, w}));
  Value p = x;
  for (int64_t d : {1, 2})
    p = b.op(OpKind::pad, {p},
             Attrs{{AttrKey::dim, d},
                   {AttrKey::low, low},
                   {AttrKey::high, k - 1 - low},
                   {AttrKey::interior, int64_t{0}}});
  Value sum;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t e = 0; e < k; ++e) {
      Value tap = p;
      for (auto [d, at, len] : {std::tuple{int64_t{1}, a, h}, std::tuple{int64_t{2}, e, w}})
        tap = b.op(OpKind::slice, {tap},
                   Attrs{{AttrKey::dim, d},
                         {AttrKey::start, at},
                         {AttrKey::end, at + len},
                         {AttrKey::step, int64_t{1}}});
      tap = b.mul(tap, b.scalar_like(tap, 0.25 + double(a * k + e)));
      sum = a + e == 0 ? tap : b.add(sum, tap);
    }
  g.outputs = {b.add(sum, b.arg(1, ty(dt, {w})))};
  return g;
}

/// A depthwise conv's weight gradient (nn_conv.cpp's DepthwiseTaps) with its
/// pads in the graph: x [n, c, h, w] padded by (top, bottom) and (left,
/// right), its kh x kw windows of dilation d times dy (their positions'
/// shape), summed over the batch and positions, kept [c, kh, kw].
struct PaddedWindows {
  int64_t n, c, h, w, kh, kw, top, bottom, left, right, dilation = 1;
  DType dtype = DType::f32;
};
inline Graph padded_window_sum(const PaddedWindows& p) {
  Graph g;
  Builder b(g);
  const int64_t oh = p.h + p.top + p.bottom - (p.kh - 1) * p.dilation;
  const int64_t ow = p.w + p.left + p.right - (p.kw - 1) * p.dilation;
  Value x = b.arg(0, ty(p.dtype, {p.n, p.c, p.h, p.w}));
  Value dy = b.arg(1, ty(p.dtype, {p.n, p.c, oh, ow}));
  auto pad = [&](Value v, int64_t dim, int64_t low, int64_t high) {
    return b.op(OpKind::pad, {v},
                Attrs{{AttrKey::dim, dim},
                      {AttrKey::low, low},
                      {AttrKey::high, high},
                      {AttrKey::interior, int64_t{0}}});
  };
  auto unfold = [&](Value v, int64_t dim, int64_t size) {
    return b.op(OpKind::unfold, {v},
                Attrs{{AttrKey::dim, dim},
                      {AttrKey::size, size},
                      {AttrKey::step, int64_t{1}},
                      {AttrKey::dilation, p.dilation}});
  };
  Value xp = pad(pad(x, 2, p.top, p.bottom), 3, p.left, p.right);
  Value win = b.permute(unfold(unfold(xp, 2, p.kh), 3, p.kw), {0, 1, 4, 5, 2, 3});
  Value prod = b.mul(win, b.reshape(dy, {p.n, p.c, 1, 1, oh, ow}));
  g.outputs = {b.sum(prod, {0, 4, 5}, false)};
  return g;
}

/// Geometries for padded_window_sum: square and not, a width not a power of
/// two, 5x5 taps, pads on one side only, images of one row, dilation, f64.
inline std::vector<PaddedWindows> padded_window_cases() {
  return {{2, 3, 12, 12, 3, 3, 1, 1, 1, 1},
          {2, 2, 7, 10, 3, 3, 1, 1, 1, 1},
          {2, 2, 9, 11, 5, 5, 2, 2, 2, 2},
          {1, 2, 5, 6, 3, 3, 2, 0, 0, 2},
          {3, 2, 1, 17, 1, 3, 0, 0, 1, 1},
          {2, 2, 6, 6, 3, 3, 1, 1, 1, 1, 2},
          {2, 3, 12, 12, 3, 3, 1, 1, 1, 1, 1, DType::f64}};
}

}  // namespace kiln::test
