// The schedule's steps (see schedule.h), in order, each a function of the graph
// and the schedule so far, with its text for dumps.
#include "passes/schedule.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

namespace kiln::schedule_steps {

void fuse(const Graph& g, const ScheduleOptions& o, Schedule& s) {
  FusionOptions f;
  f.enabled = o.fusion;
  s.groups = plan_fusion(g, f);
}

std::string fuse_str(const Graph& g, const Schedule& s) {
  return fusion_plan_str(g, s.groups);
}

namespace {

// A copy group of reshapes alone (one input, one output, the same elements in
// the same order) that reads a value a kernel group writes, and is not an
// output: its readers read that value's buffer, seen with the reshape's shape,
// and the copy goes. The depthwise conv's input gradient copied its 75 MB of
// tap products so (bench_conv). A graph input's reshape is still copied (a
// parameter's buffer may be updated in place while the reshape is read), as is
// a collective's result. Runs after the collectives step, which orders groups
// by what they read and write (a reader of the reshape must stay after the
// source's writer), and renumbers the groups its buckets name.
void fold_reshapes(const Graph& g, Schedule& s) {
  std::vector<char> escapes(g.size(), 0);
  for (Value v : g.outputs) escapes[v.node] = 1;
  for (const ParamUpdate& u : g.updates) escapes[u.value.node] = 1;
  std::unordered_map<Value, GroupKind, ValueHash> written_by;
  std::vector<FusionGroup> kept;
  // Per group: its new index, or for a folded one its last kept predecessor's.
  std::vector<size_t> renumbered;
  for (FusionGroup& grp : s.groups) {
    renumbered.push_back(kept.empty() ? CollectiveSchedule::kBeforeAll : kept.size() - 1);
    const bool reshapes = grp.kind == GroupKind::Copy && grp.inputs.size() == 1 &&
                          grp.outputs.size() == 1 && !escapes[grp.outputs[0].node] &&
                          std::all_of(grp.nodes.begin(), grp.nodes.end(),
                                      [&](NodeId id) { return g[id].op == OpKind::reshape; });
    if (reshapes) {
      auto f = s.folded_reshape.find(grp.inputs[0]);
      const Value src = f == s.folded_reshape.end() ? grp.inputs[0] : f->second;
      auto w = written_by.find(src);
      if (w != written_by.end() && w->second != GroupKind::Opaque) {
        s.folded_reshape[grp.outputs[0]] = src;
        continue;
      }
    }
    // An output that is a reshape of another output of the same kernel (a
    // padded gradient that one group reads whole and another through a
    // reshape): one buffer holds both, the reshape's readers see it with the
    // reshape's shape. The depthwise conv's backward wrote its padded dY twice.
    if (grp.kind != GroupKind::Opaque) {
      std::vector<Value> outs;
      for (Value v : grp.outputs) {
        const Node& n = g[v.node];
        const bool view =
            n.op == OpKind::reshape && !escapes[v.node] &&
            std::find(grp.outputs.begin(), grp.outputs.end(), n.operands[0]) != grp.outputs.end();
        if (view)
          s.folded_reshape[v] = n.operands[0];
        else
          outs.push_back(v);
      }
      // A reshape of a reshape: the buffer is the kept output's.
      for (Value v : grp.outputs)
        for (auto f = s.folded_reshape.find(v); f != s.folded_reshape.end();) {
          auto next = s.folded_reshape.find(f->second);
          if (next == s.folded_reshape.end()) break;
          f->second = next->second;
        }
      grp.outputs = std::move(outs);
    }
    for (Value v : grp.outputs) written_by[v] = grp.kind;
    renumbered.back() = kept.size();
    kept.push_back(std::move(grp));
  }
  s.groups = std::move(kept);
  for (CollectiveSchedule::Bucket& b : s.comm.buckets) {
    for (size_t& gi : b.groups) gi = renumbered[gi];
    if (b.start_after != CollectiveSchedule::kBeforeAll) b.start_after = renumbered[b.start_after];
  }
}

std::string fold_reshapes_str(const Schedule& s) {
  std::vector<std::pair<NodeId, NodeId>> folds;
  for (const auto& [v, src] : s.folded_reshape) folds.push_back({v.node, src.node});
  std::sort(folds.begin(), folds.end());
  std::ostringstream os;
  for (const auto& [v, src] : folds)
    os << "%" << v << " = reshape of %" << src << ": kept in %" << src << "'s buffer\n";
  return os.str();
}

}  // namespace

// A copy group of one permute that swaps the last two dims, read only by matmuls
// and not an output: its readers read the untransposed value instead (so the
// memory plan sees that value's true last use) and the copy goes.
void fold_transposes(const Graph& g, const ScheduleOptions&, Schedule& s) {
  std::vector<std::vector<NodeId>> users(g.size());
  for (NodeId id = 0; id < g.size(); ++id)
    for (Value o : g[id].operands) users[o.node].push_back(id);
  std::vector<char> escapes(g.size(), 0);
  for (Value v : g.outputs) escapes[v.node] = 1;
  for (const ParamUpdate& u : g.updates) escapes[u.value.node] = 1;
  for (const FusionGroup& grp : s.groups) {
    if (grp.kind != GroupKind::Copy || grp.nodes.size() != 1) continue;
    const Node& n = g[grp.nodes[0]];
    if (n.op != OpKind::permute || escapes[grp.nodes[0]]) continue;
    const auto& perm = n.attrs.ints(AttrKey::perm);
    const int64_t rank = static_cast<int64_t>(perm.size());
    bool last_two = rank >= 2 && perm[rank - 1] == rank - 2 && perm[rank - 2] == rank - 1;
    for (int64_t d = 0; d + 2 < rank; ++d) last_two = last_two && perm[d] == d;
    bool only_matmuls = !users[grp.nodes[0]].empty();
    for (NodeId u : users[grp.nodes[0]]) only_matmuls = only_matmuls && g[u].op == OpKind::matmul;
    if (last_two && only_matmuls) s.folded_transpose[Value(grp.nodes[0])] = n.operands[0];
  }
  std::vector<FusionGroup> kept;
  for (FusionGroup& grp : s.groups) {
    if (grp.kind == GroupKind::Copy && grp.nodes.size() == 1 &&
        s.folded_transpose.count(Value(grp.nodes[0])))
      continue;
    std::vector<Value> inputs;
    for (Value v : grp.inputs) {
      auto f = s.folded_transpose.find(v);
      const Value src = f == s.folded_transpose.end() ? v : f->second;
      if (std::find(inputs.begin(), inputs.end(), src) == inputs.end()) inputs.push_back(src);
    }
    grp.inputs = std::move(inputs);
    kept.push_back(std::move(grp));
  }
  s.groups = std::move(kept);
}

std::string fold_transposes_str(const Graph&, const Schedule& s) {
  std::vector<std::pair<NodeId, NodeId>> folds;
  for (const auto& [t, src] : s.folded_transpose) folds.push_back({t.node, src.node});
  std::sort(folds.begin(), folds.end());
  std::ostringstream os;
  for (const auto& [t, src] : folds)
    os << "%" << t << " = transpose of %" << src << ": matmuls read %" << src << " transposed\n";
  if (folds.empty()) os << "no transposes folded\n";
  return os.str();
}

void collectives(const Graph& g, const ScheduleOptions& o, Schedule& s) {
  s.comm = schedule_collectives(g, s.groups, o.overlap_collectives);
}

std::string collectives_str(const Graph& g, const Schedule& s) {
  const std::string t = collective_schedule_str(g, s.groups, s.comm);
  return t.empty() ? "no collectives\n" : t;
}

void memory(const Graph& g, const ScheduleOptions&, Schedule& s) {
  fold_reshapes(g, s);
  s.memory = plan_memory(g, s.groups, s.folded_reshape);
}

std::string memory_str(const Graph&, const Schedule& s) {
  return fold_reshapes_str(s) + memory_plan_str(s.memory);
}

std::string lower_str(const Graph&, const Schedule& s) {
  std::ostringstream os;
  for (size_t gi = 0; gi < s.overwritable.size(); ++gi)
    for (const auto& [v, in] : s.overwritable[gi])
      os << "group " << gi << ": %" << v.node << " may be stored over %" << in.node
         << " (its kernel reads it only where it writes)\n";
  const std::string t = os.str();
  return t.empty() ? "no kernel output may be stored over an input\n" : t;
}

// A parameter update is written into the parameter's buffer (no copy per call)
// when no later group reads the old value and the update is not also returned:
// directly when its group does not read the parameter, else stored over it when
// lowering found that the group's kernel reads it only where it writes.
void in_place(const Graph& g, const ScheduleOptions&, Schedule& s) {
  const size_t n = s.groups.size();
  s.overwritable.resize(n);
  s.direct.assign(n, {});
  s.in_place.assign(n, {});
  std::unordered_set<Value, ValueHash> returned;
  for (Value v : g.outputs)
    if (op_info(g[v.node].op).category != OpCategory::Input) returned.insert(v);
  std::unordered_map<Value, int64_t, ValueHash> update_of;
  for (const ParamUpdate& u : g.updates) update_of[u.value] = u.param;
  std::unordered_map<int64_t, NodeId> param_node;
  for (NodeId id : g.params()) param_node[g[id].attrs.i(AttrKey::index)] = id;
  std::unordered_map<NodeId, size_t> last_reader;
  for (size_t gi = 0; gi < n; ++gi)
    for (Value v : s.groups[gi].inputs)
      if (g[v.node].op == OpKind::param) last_reader[v.node] = gi;
  // A parameter returned as is is read by the copy of the outputs, after every group.
  for (Value v : g.outputs)
    if (g[v.node].op == OpKind::param) last_reader[v.node] = n;
  for (size_t gi = 0; gi < n; ++gi) {
    const FusionGroup& grp = s.groups[gi];
    if (grp.kind != GroupKind::Elementwise && grp.kind != GroupKind::Matmul) continue;
    std::vector<std::pair<Value, Value>> pairs;
    for (Value v : grp.outputs) {
      auto u = update_of.find(v);
      if (u == update_of.end() || returned.count(v)) continue;
      const Value p(param_node.at(u->second));
      auto lr = last_reader.find(p.node);
      if (lr != last_reader.end() && lr->second > gi) continue;  // the old value is read later
      const bool reads = std::find(grp.inputs.begin(), grp.inputs.end(), p) != grp.inputs.end();
      (reads ? pairs : s.direct[gi]).push_back({v, p});
    }
    const auto& may = s.overwritable[gi];
    const bool all = std::all_of(pairs.begin(), pairs.end(), [&](const auto& p) {
      return std::find(may.begin(), may.end(), p) != may.end();
    });
    if (!pairs.empty() && all) s.in_place[gi] = std::move(pairs);
  }
}

std::string in_place_str(const Graph&, const Schedule& s) {
  std::ostringstream os;
  for (size_t gi = 0; gi < s.groups.size(); ++gi) {
    for (const auto& [v, p] : s.direct[gi])
      os << "group " << gi << ": %" << v.node << " written into param %" << p.node << "\n";
    for (const auto& [v, p] : s.in_place[gi])
      os << "group " << gi << ": %" << v.node << " stored over param %" << p.node
         << " (read only where written)\n";
  }
  const std::string t = os.str();
  return t.empty() ? "no parameter updates in place\n" : t;
}

namespace {

// True when a matmul group computes out = p - c * (a @ b) (or p + c * (a @ b)) for a
// scalar constant c and nothing else: then BLAS computes it into p's buffer with
// alpha = -c (or c) and beta = 1, and no epilogue kernel runs.
bool accumulate_form(const Graph& g, const FusionGroup& grp, Value p, double* alpha) {
  if (grp.outputs.size() != 1) return false;
  const Value mv(grp.nodes.front());
  const Node& out = g[grp.outputs[0].node];
  const DType dt = out.type().dtype;
  if ((dt != DType::f32 && dt != DType::f64) || g.type(mv) != out.type() || g.type(p) != out.type())
    return false;
  int computing = 0;
  for (NodeId id : grp.nodes) computing += g[id].op != OpKind::constant;
  if (computing != 3 || (out.op != OpKind::sub && out.op != OpKind::add)) return false;
  if (!(out.operands[0] == p)) return false;
  const Node& mul = g[out.operands[1].node];
  if (mul.op != OpKind::mul || mul.type() != out.type()) return false;
  const int which = mul.operands[0] == mv ? 1 : mul.operands[1] == mv ? 0 : -1;
  if (which < 0) return false;
  const Node& c = g[mul.operands[which].node];
  if (c.op != OpKind::constant) return false;
  const double v = c.attrs.f(AttrKey::value);
  *alpha = out.op == OpKind::sub ? -v : v;
  return true;
}

}  // namespace

// P + alpha (a @ b) into P's buffer, unless a or b is P itself (or its folded
// transpose): BLAS must not read an operand it writes.
void accumulate(const Graph& g, const ScheduleOptions&, Schedule& s) {
  s.accumulate.assign(s.groups.size(), std::nullopt);
  for (size_t gi = 0; gi < s.groups.size(); ++gi) {
    if (s.groups[gi].kind != GroupKind::Matmul || s.in_place[gi].size() != 1) continue;
    const Value p = s.in_place[gi][0].second;
    const Node& mm = g[s.groups[gi].nodes.front()];
    if (matmul_operand(s, mm.operands[0]) == p || matmul_operand(s, mm.operands[1]) == p) continue;
    double alpha = 0;
    if (accumulate_form(g, s.groups[gi], p, &alpha)) s.accumulate[gi] = alpha;
  }
}

std::string accumulate_str(const Graph&, const Schedule& s) {
  std::ostringstream os;
  for (size_t gi = 0; gi < s.groups.size(); ++gi)
    if (s.accumulate[gi])
      os << "group " << gi << ": %" << s.in_place[gi][0].second.node << " += " << *s.accumulate[gi]
         << " * matmul %" << s.groups[gi].nodes.front() << " (one BLAS call, beta = 1)\n";
  const std::string t = os.str();
  return t.empty() ? "no accumulating matmuls\n" : t;
}

}  // namespace kiln::schedule_steps

namespace kiln {

Value matmul_operand(const Schedule& s, Value v, bool* transposed) {
  auto f = s.folded_transpose.find(v);
  const bool folded = f != s.folded_transpose.end();
  if (transposed) *transposed = folded;
  return folded ? f->second : v;
}

}  // namespace kiln
