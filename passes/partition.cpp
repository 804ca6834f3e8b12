// The forward/backward partition (see partition.h).
#include "passes/partition.h"

#include <algorithm>
#include <sstream>

#include "ir/printer.h"
#include "passes/grad_analysis.h"

namespace kiln {

namespace {

// The tensors whose gradients the backward gives: arguments and parameters
// that require grad and that a gradient of the roots reaches, each at the value
// the body first read (a write under NoGradGuard rebinds later uses to it).
std::vector<Value> choose_wrt(const Graph& g, const PartitionRequest& req, Partition& p) {
  const std::vector<char> reach = gradient_reach(g, req.roots);
  std::vector<Value> wrt;
  for (NodeId id : g.args()) {
    const int64_t i = g[id].attrs.i(AttrKey::index);
    if (i < 0 || i >= req.n_args || i >= static_cast<int64_t>(req.arg_requires.size()) ||
        !req.arg_requires[static_cast<size_t>(i)] || !reach[id])
      continue;
    p.wrt_args.push_back(i);
    wrt.push_back(Value(id));
  }
  for (size_t q = 0; q < req.param_requires.size(); ++q) {
    if (!req.param_requires[q]) continue;
    const Value v = g.param_value(static_cast<int64_t>(q));
    if (!v.valid() || !reach[v.node]) continue;
    p.wrt_params.push_back(static_cast<int64_t>(q));
    wrt.push_back(v);
  }
  p.wrt_reached_by.resize(wrt.size());
  for (size_t k = 0; k < req.roots.size(); ++k) {
    const std::vector<char> from_k = gradient_reach(g, {&req.roots[k], 1});
    for (size_t j = 0; j < wrt.size(); ++j)
      if (from_k[wrt[j].node]) p.wrt_reached_by[j].push_back(k);
  }
  return wrt;
}

// What each root's backward reads of the values the traced ops saved: the
// first that a write replaced since, and those the caller still holds.
void saved_reads(const Graph& g, const PartitionRequest& req, Partition& p) {
  for (size_t k = 0; k < req.roots.size(); ++k) {
    const std::span<const Value> root(&req.roots[k], 1);
    if (const SavedValues::Stale s = req.saved->first_stale(g, root); s.node != kNoNode)
      p.stale_roots.push_back({{k, s.node, g[s.node].op, g[s.node].loc}, s.expected, s.found});
    for (const auto& [id, ref] : req.saved->reads(g, root)) {
      const auto h = std::find(req.held.begin(), req.held.end(), ref->storage.get());
      if (h != req.held.end())
        p.held_reads.push_back({{k, id, g[id].op, g[id].loc}, size_t(h - req.held.begin())});
    }
  }
}

}  // namespace

Partition partition(Builder& traced, const PartitionRequest& req) {
  Graph& g = traced.graph();
  Partition p;
  p.split = req.split;
  if (!req.split) {
    p.forward = strip_traced_custom(g);
    return p;
  }
  const size_t forward_size = g.size();
  if (req.saved) saved_reads(g, req, p);
  for (Value r : req.roots) p.root_types.push_back(g.type(r));
  p.root_outputs = req.root_outputs;
  const std::vector<char> rg = requiring_grad(g, req.arg_requires, req.param_requires);
  for (size_t k = 0; k < req.roots.size(); ++k) {
    if (const NodeId n = freed_read(g, {&req.roots[k], 1}, rg, &req.freed); n != kNoNode)
      p.freed_roots.push_back({k, n, g[n].op, g[n].loc});
    if (const NodeId n = freed_read(g, {&req.roots[k], 1}, rg); n != kNoNode)
      p.reading_roots.push_back({k, n, g[n].op, g[n].loc});
  }
  const std::vector<Value> wrt = choose_wrt(g, req, p);
  p.saved_begin = g.outputs.size();
  if (p.freed_roots.size() == req.roots.size()) {
    p.backward_freed = true;
    for (Value v : wrt) p.gradient_types.push_back(g.type(v));
    p.forward = strip_traced_custom(g);
    return p;
  }
  std::vector<Value> seeds_v;
  std::vector<NodeId> seeds;
  for (size_t k = 0; k < req.roots.size(); ++k) {
    const int64_t index = req.n_args + 1000000 + static_cast<int64_t>(req.root_outputs[k]);
    const Value s = traced.arg(index, g.type(req.roots[k]));
    seeds.push_back(s.node);
    seeds_v.push_back(s);
  }
  const std::vector<Value> grads = build_gradients(traced, req.roots, seeds_v, wrt, req.custom);
  ForwardBackward fb = split_forward_backward(g, forward_size, g.outputs, seeds, grads, req.n_args,
                                              req.written_args);
  for (Value v : fb.backward.outputs) p.gradient_types.push_back(fb.backward.type(v));
  p.forward = strip_traced_custom(fb.forward);
  p.backward = strip_traced_custom(fb.backward);
  p.saved = fb.saved;
  return p;
}

std::string partition_str(const Partition& p) {
  std::ostringstream os;
  os << print_graph(p.forward);
  if (!p.split) return os.str();
  os << "// the forward returns " << p.saved_begin << " outputs, then " << p.saved
     << " values saved for the backward\n";
  if (p.backward_freed) {
    os << "// no backward: every output's gradient reads what a backward() inside the body freed\n";
    return os.str();
  }
  os << "// backward: args 0.. the call's arguments, then the saved values, then one seed per "
        "output that requires grad; outputs: the gradients of";
  for (int64_t a : p.wrt_args) os << " arg " << a;
  for (int64_t q : p.wrt_params) os << " param " << q;
  os << "\n";
  std::istringstream lines(print_graph(p.backward));
  for (std::string line; std::getline(lines, line);) os << "//   " << line << "\n";
  return os.str();
}

}  // namespace kiln
