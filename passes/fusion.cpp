// Fusion grouping. Greedy and legality-checked:
//
// 1. Every needed non-input node except `constant` nodes starts as its own group.
// 2. Walking consumers in program order, each (producer group, consumer group)
//    pair is merged when the merged set is a valid group (GroupChecker) and the
//    merge creates no cycle through a third group (creates_cycle).
// 3. `constant` nodes (one value everywhere, free to recompute) become members of
//    every group whose members read them; one read as a buffer (by a matmul or a
//    custom call) or returned by the graph also gets a group of its own.
// 4. Groups are ordered topologically, ties broken by program order.
//
// Validity is decided on the whole candidate set, so the rules live in one place.
// Each member gets an index *label*: which points of the group's iteration space
// it is evaluated at. F is "each point of the full space S" (as a linear index),
// Rw is "each row" (a point of S with the reduced dims R removed); other labels
// are derived from these through index remaps (broadcast, permute, slice, pad;
// reshape keeps the linear index, so it keeps the label). A member must have one
// label (else it would be computed twice, at different points), a label derived
// through a broadcast means recomputation, allowed only for cheap ops with a
// single consumer, matmuls sit at F, and reductions at Rw with operands at F.
#include "passes/fusion.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <span>
#include <sstream>

namespace kiln {

namespace {

enum class Role : uint8_t {
  None,      // graph input or not needed: in no group
  Constant,  // a `constant`: a member of every group that reads it
  Fusible,   // elementwise, movement, arange
  Reduce,
  Matmul,
  Scatter,  // scatter_add: a sink that takes its operands' producers in
  Scan,     // cumsum, cumprod, logcumsumexp: the same
  Opaque,   // custom, checks, sorts, collectives, literal: always alone
};

Role role_of(OpKind k) {
  switch (op_info(k).category) {
    case OpCategory::Input:
      return Role::None;
    case OpCategory::Custom:
    case OpCategory::Check:
    case OpCategory::Sort:
    case OpCategory::Attention:
    case OpCategory::Collective:
      return Role::Opaque;
    case OpCategory::Creation:
      if (k == OpKind::constant) return Role::Constant;
      if (k == OpKind::arange) return Role::Fusible;
      return Role::Opaque;
    case OpCategory::Reduce:
      return Role::Reduce;
    case OpCategory::Matmul:
      return Role::Matmul;
    case OpCategory::Scatter:
      return Role::Scatter;
    case OpCategory::Scan:
      return Role::Scan;
    default:
      return Role::Fusible;  // elementwise, movement, gather
  }
}

bool is_movement(OpKind k) {
  return op_info(k).category == OpCategory::Movement;
}

// Ops cheap enough to recompute for every point a broadcast maps onto them.
bool is_cheap(OpKind k) {
  if (is_expensive(k)) return false;
  return role_of(k) == Role::Fusible || role_of(k) == Role::Constant;
}

GroupKind singleton_kind(OpKind k) {
  switch (role_of(k)) {
    case Role::Reduce:
      return GroupKind::Reduction;
    case Role::Matmul:
      return GroupKind::Matmul;
    case Role::Opaque:
      return GroupKind::Opaque;
    case Role::Scatter:
      return GroupKind::Scatter;
    case Role::Scan:
      return GroupKind::Scan;
    default:
      return is_movement(k) ? GroupKind::Copy : GroupKind::Elementwise;
  }
}

std::vector<int64_t> reduced_dims(const Graph& g, NodeId id) {
  const Node& n = g[id];
  int64_t rank = g.type(n.operands[0]).rank();
  if (is_arg_reduction(n.op)) return {normalize_dim(n.attrs.i(AttrKey::dim), rank)};
  return normalize_dims(n.attrs.ints(AttrKey::dims), rank);
}

// What the whole pass needs to know about the graph.
struct Analysis {
  explicit Analysis(const Graph& g) : g(g), role(g.size()), needed(g.size()), external(g.size()) {
    for (Value v : g.outputs) needed.at(v.node) = external.at(v.node) = true;
    for (const ParamUpdate& u : g.updates)
      needed.at(u.value.node) = external.at(u.value.node) = true;
    for (NodeId id = static_cast<NodeId>(g.size()); id-- > 0;)
      if (needed[id])
        for (Value v : g[id].operands) needed.at(v.node) = true;
    users.resize(g.size());
    for (NodeId id = 0; id < g.size(); ++id) {
      role[id] = needed[id] ? role_of(g[id].op) : Role::None;
      if (!needed[id]) continue;
      for (uint32_t i = 0; i < g[id].operands.size(); ++i)
        users[g[id].operands[i].node].push_back({id, i});
    }
  }

  /// Nodes that are grouped (merged by union-find).
  bool grouped(NodeId id) const { return role[id] != Role::None && role[id] != Role::Constant; }
  /// Number of distinct nodes reading `id`.
  size_t consumers(NodeId id) const {
    size_t n = 0;
    for (size_t i = 0; i < users[id].size(); ++i)
      if (i == 0 || users[id][i].first != users[id][i - 1].first) ++n;
    return n;
  }

  const Graph& g;
  std::vector<Role> role;
  std::vector<bool> needed;
  std::vector<bool> external;  // some result is a graph output or an update value
  std::vector<std::vector<std::pair<NodeId, uint32_t>>> users;  // (reader, operand index)
};

// Decides whether a set of nodes is a valid group, and of which kind.
class GroupChecker {
 public:
  explicit GroupChecker(const Analysis& a)
      : a_(a), g_(a.g), mark_(a.g.size(), 0), labels_(a.g.size()) {}

  /// The kind of a group with these members (ascending ids, no constants), or
  /// nothing when they cannot form one kernel.
  std::optional<GroupKind> check(std::span<const NodeId> members) {
    recomputes_ = false;
    if (members.size() == 1) return singleton_kind(g_[members[0]].op);
    ++stamp_;
    for (NodeId m : members) mark_[m] = stamp_;

    NodeId mm = kNoNode, first_reduce = kNoNode, scatter = kNoNode;
    bool all_movement = true;
    for (NodeId m : members) {
      switch (a_.role[m]) {
        case Role::Opaque:
          return std::nullopt;
        case Role::Scatter:
        case Role::Scan:
          if (scatter != kNoNode) return std::nullopt;
          scatter = m;
          break;
        case Role::Matmul:
          if (mm != kNoNode) return std::nullopt;
          mm = m;
          break;
        case Role::Reduce:
          if (first_reduce == kNoNode) first_reduce = m;
          break;
        default:
          break;
      }
      if (!is_movement(g_[m].op)) all_movement = false;
    }
    if (mm != kNoNode && first_reduce != kNoNode) return std::nullopt;
    // A scatter_add or a scan (`scatter`: the sink) with the producers of its
    // operands: it is the group's only output, and nothing reduces or
    // multiplies in its kernel.
    if (scatter != kNoNode) {
      if (mm != kNoNode || first_reduce != kNoNode) return std::nullopt;
      for (NodeId m : members)
        if (m != scatter && is_output(m)) return std::nullopt;
    }

    // The iteration space.
    reduction_ = first_reduce != kNoNode;
    if (scatter != kNoNode) {
      full_ = g_[scatter].type().shape;
    } else if (reduction_) {
      full_ = g_.type(g_[first_reduce].operands[0]).shape;
      dims_ = reduced_dims(g_, first_reduce);
      for (NodeId m : members) {
        if (a_.role[m] != Role::Reduce) continue;
        if (g_.type(g_[m].operands[0]).shape != full_ || reduced_dims(g_, m) != dims_)
          return std::nullopt;
      }
      kept_ = squeezed_ = {};
      for (int64_t d = 0; d < static_cast<int64_t>(full_.size()); ++d) {
        bool reduced = std::binary_search(dims_.begin(), dims_.end(), d);
        kept_.push_back(reduced ? 1 : full_[d]);
        if (!reduced) squeezed_.push_back(full_[d]);
      }
    } else if (mm != kNoNode) {
      full_ = g_[mm].type().shape;
    } else {
      full_.clear();
      for (NodeId m : members)
        if (is_output(m)) {
          full_ = g_[m].type().shape;
          break;
        }
    }

    // Reducing only dims of size 1 leaves one element per row: rows are points.
    row_ = reduction_ && numel(kept_) == numel(full_) ? kFull : kRowLabel;

    // Labels, from the outputs back to the leaves.
    derived_.clear();
    label_dup_ = {false, false};
    label_unfold_ = {false, false};
    for (size_t k = members.size(); k-- > 0;) {
      NodeId m = members[k];
      std::vector<int>& labels = labels_[m];
      labels.clear();
      auto add = [&](int l) {
        if (l < 0) return false;
        if (std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(l);
        return true;
      };
      if (is_output(m) && !add(base_label(g_[m].type().shape))) return std::nullopt;
      for (auto [user, index] : a_.users[m])
        if (in_group(user))
          for (int at : labels_[user])
            if (!add(edge_label(user, index, at))) return std::nullopt;
      if (labels.empty()) return std::nullopt;
      // Read at several places (the taps of a conv's windows): see recomputable.
      if (labels.size() > 1 && (!recompute_ || !recomputable(m))) return std::nullopt;
      recomputes_ = recomputes_ || labels.size() > 1;
      for (int label : labels) {
        if (a_.role[m] == Role::Matmul && label != kFull) return std::nullopt;
        if (a_.role[m] == Role::Reduce && label != row_) return std::nullopt;
        // (An affine view is recomputed under a broadcast too: no arithmetic.)
        if (label_dup_[label] && !affine_view(m) && (!is_cheap(g_[m].op) || a_.consumers(m) != 1))
          return std::nullopt;
        // A pad read through overlapping windows (unfold) is copied once: its
        // clamped reads, repeated per window, keep the kernel's loads from
        // being consecutive, so its loop did not vectorise (bench_conv's
        // depthwise weight gradient: 29 ms in place; copied, 0.7 ms for the
        // copy and 3.1 for the sums, one thread). Unless a long reduction sums
        // the windows' positions (that weight gradient, not a pooling's taps):
        // its loop over the image's plane is cut where the reads come into
        // bounds, and reads unclamped there (codegen/lower_reduce.cpp). The
        // pad joins once the windows are in the reduction's group: a merge of
        // a later sweep, as a member read at several labels (it is, at one
        // label per window).
        if (label_unfold_[label] && g_[m].op == OpKind::pad) {
          if (!reduction_ || numel(full_) < kMinWindowSum * numel(kept_)) return std::nullopt;
          recomputes_ = true;
        }
      }
    }

    if (mm != kNoNode) {
      // The matmul reads dense buffers, and only its epilogue reads its product,
      // unless the product is returned or updated anyway (a weight gradient kept
      // in `.grad` that the optimizer's update reads): then the library call
      // writes it into that output's buffer, where the epilogue reads it.
      if (is_output(mm) && !a_.external[mm]) return std::nullopt;
      for (Value v : g_[mm].operands)
        if (in_group(v.node)) return std::nullopt;
      return GroupKind::Matmul;
    }
    if (scatter != kNoNode)
      return a_.role[scatter] == Role::Scan ? GroupKind::Scan : GroupKind::Scatter;
    if (reduction_) return GroupKind::Reduction;
    return all_movement ? GroupKind::Copy : GroupKind::Elementwise;
  }

  /// Whether the last group check() accepted evaluates some member at several
  /// labels (see recomputable).
  bool recomputes() const { return recomputes_; }
  /// Whether check() may accept such groups at all.
  void allow_recompute(bool v) { recompute_ = v; }

 private:
  static constexpr int kFull = 0, kRowLabel = 1;
  // The shortest reduction (elements per row) that reads a pad through
  // windows in place (see check).
  static constexpr int64_t kMinWindowSum = 256;
  enum EdgeTag : int64_t {
    kBroadcast = -1,
    kPermute = -2,
    kSlice = -3,
    kPad = -4,
    kScatterIndex = -5,
    kUnfold = -6
  };

  bool in_group(NodeId id) const { return mark_[id] == stamp_; }

  bool is_output(NodeId m) const {
    if (a_.external[m]) return true;
    for (auto [user, index] : a_.users[m])
      if (!in_group(user)) return true;
    return false;
  }

  // Whether member m may be evaluated at several labels (read at several
  // places, as a conv's windows read the padded image once per tap): its
  // every evaluation is index arithmetic and one load (index_only), and its
  // rows are long enough that the kernel's inner loop runs a vector's worth of
  // contiguous elements per evaluation. Shorter rows are copied once, by a
  // kernel of their own. Measured (bench_conv, one thread): the fused windows
  // of rows of 28-34 elements took 0.32-0.96 of the separate kernels' time
  // (3x3 depthwise 32x32, 5x5 rgb 32x32); of rows of 6 and 10 (the digits
  // convs' padded 4x4 and 8x8 images), 1.6-2.1x, every tap's index a chain
  // of scalar selects. A permute that moves the last dim reads each row at a
  // stride, one scalar load an element, so it is copied once, and the taps
  // read that copy's rows (conv2d's channels-last patches, nn_conv.cpp: digits
  // conv2's patch kernel 56 -> 26 us and the copy 23 us, one thread). A slice
  // or reshape of the group's inputs (affine_view) is recomputed whatever its
  // rows: one load at an affine index, no select (digits conv1's tap sum read
  // its padded image's short rows through three copies: 0.52 -> 0.58 of the
  // roofline without them).
  bool recomputable(NodeId m) const {
    constexpr int64_t kMinRow = 16;
    const Node& n = g_[m];
    const Shape& s = n.type().shape;
    if (s.empty() || !index_only(m)) return false;
    if (s.back() < kMinRow) return affine_view(m);
    return n.op != OpKind::permute || n.attrs.ints(AttrKey::perm).back() == int64_t(s.size()) - 1;
  }

  // Whether member m is a slice, reshape or broadcast of values read from
  // memory (the group's inputs) through such views only: each evaluation is
  // one load at an index affine in the output's, rows of any length.
  bool affine_view(NodeId m) const {
    const Node& n = g_[m];
    if (n.op != OpKind::slice && n.op != OpKind::reshape && n.op != OpKind::expand) return false;
    for (Value v : n.operands)
      if (in_group(v.node) && !affine_view(v.node)) return false;
    return true;
  }

  // Whether every evaluation of member m is index arithmetic and one load: a
  // movement op, or a concatenation (an add of pads of one shape, which codegen
  // turns into a select of the pieces' positions). Such a value can be
  // evaluated at several labels without repeating any arithmetic on data; the
  // members it reads are checked at their own labels.
  bool index_only(NodeId m) const {
    const Node& n = g_[m];
    if (is_movement(n.op)) return true;
    if (n.op != OpKind::add) return false;
    for (Value v : n.operands) {
      if (!in_group(v.node) || g_.type(v) != n.type()) return false;
      const Node& p = g_[v.node];
      if (p.op != OpKind::pad && !(p.op == OpKind::add && index_only(v.node))) return false;
    }
    return true;
  }

  // The label of a value the group writes, from its shape.
  int base_label(const Shape& s) const {
    if (s == full_) return kFull;
    if (reduction_ && (s == kept_ || s == squeezed_)) return row_;
    // A value of S's size written at each point of S, in linear order: a
    // reshape of S (conv2d's [N, O, H'W'] GEMM result seen as [N, O, H', W']).
    if (!reduction_ && numel(s) == numel(full_)) return kFull;
    return -1;
  }

  int derived(int parent, std::vector<int64_t> key, const Shape& operand_shape, bool dup) {
    key.insert(key.begin(), parent);
    key.push_back(-100);
    key.insert(key.end(), operand_shape.begin(), operand_shape.end());
    auto [it, added] = derived_.try_emplace(std::move(key), static_cast<int>(label_dup_.size()));
    if (added) {
      label_dup_.push_back(label_dup_[parent] || dup);
      label_unfold_.push_back(label_unfold_[parent]);
    }
    return it->second;
  }

  // Operand shape `from` broadcast to `to` at label `at`: back over R when it is the
  // reduced shape of a full-space value, else a derived (recomputing) label.
  int broadcast_label(int at, const Shape& from, const Shape& to) {
    if (reduction_ && at == kFull && to == full_) {
      Shape padded(full_.size() - std::min(full_.size(), from.size()), 1);
      padded.insert(padded.end(), from.begin(), from.end());
      if (padded == kept_) return row_;
    }
    std::vector<int64_t> key{kBroadcast};
    key.insert(key.end(), to.begin(), to.end());
    return derived(at, std::move(key), from, numel(from) < numel(to));
  }

  // The label operand `index` of member `user`, evaluated at label `at`, gets
  // from that use.
  int edge_label(NodeId user, uint32_t index, int at) {
    const Node& c = g_[user];
    const Shape& from = g_.type(c.operands[index]).shape;
    const Shape& to = c.type().shape;
    const Attrs& attrs = c.attrs;
    switch (op_info(c.op).category) {
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Ternary:
        return from == to ? at : broadcast_label(at, from, to);
      case OpCategory::Reduce:
        return kFull;
      case OpCategory::Gather:
        // The indices are read at the output's points; the data at the points
        // they name, from memory (it is never a member).
        return index == 1 ? at : -1;
      case OpCategory::Scatter:
        // The base at the output's points; the indices and the source at the
        // points of the indices' shape, each once.
        return index == 0 ? at : derived(at, {kScatterIndex}, from, false);
      case OpCategory::Scan:
        return at;  // each element read once, where its output is written
      case OpCategory::Movement:
        switch (c.op) {
          case OpKind::reshape:
          case OpKind::detach:
          case OpKind::rebind:
            return at;
          case OpKind::expand:
            return broadcast_label(at, from, to);
          case OpKind::permute: {
            const std::vector<int64_t>& perm = attrs.ints(AttrKey::perm);
            std::vector<int64_t> key{kPermute};
            key.insert(key.end(), perm.begin(), perm.end());
            bool identity = true;
            for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
            return identity ? at : derived(at, std::move(key), from, false);
          }
          case OpKind::slice: {
            if (from == to && attrs.i(AttrKey::start) == 0) return at;
            int64_t dim = normalize_dim(attrs.i(AttrKey::dim), static_cast<int64_t>(from.size()));
            return derived(at,
                           {kSlice, dim, attrs.i(AttrKey::start), attrs.i(AttrKey::end),
                            attrs.i(AttrKey::step)},
                           from, false);
          }
          case OpKind::unfold: {
            // Overlapping windows read elements more than once.
            int64_t dim = normalize_dim(attrs.i(AttrKey::dim), static_cast<int64_t>(from.size()));
            const bool overlap = numel(from) < numel(to);
            const int label = derived(at,
                                      {kUnfold, dim, attrs.i(AttrKey::size), attrs.i(AttrKey::step),
                                       attrs.i(AttrKey::dilation, 1)},
                                      from, overlap);
            if (overlap) label_unfold_[size_t(label)] = true;
            return label;
          }
          case OpKind::pad: {
            int64_t dim = normalize_dim(attrs.i(AttrKey::dim), static_cast<int64_t>(from.size()));
            return derived(at,
                           {kPad, dim, attrs.i(AttrKey::low), attrs.i(AttrKey::high),
                            attrs.i(AttrKey::interior)},
                           from, false);
          }
          default:
            return -1;
        }
      default:
        return -1;  // a matmul reads its operands from memory
    }
  }

  const Analysis& a_;
  const Graph& g_;
  std::vector<uint32_t> mark_;
  uint32_t stamp_ = 0;
  std::vector<std::vector<int>> labels_;  // per member, the labels it is evaluated at
  bool recomputes_ = false, recompute_ = true;
  std::map<std::vector<int64_t>, int> derived_;
  std::vector<bool> label_dup_;
  std::vector<bool> label_unfold_;  // read through overlapping windows (unfold)
  bool reduction_ = false;
  int row_ = kRowLabel;  // the label of a row: kFull when rows are single points
  Shape full_, kept_, squeezed_;
  std::vector<int64_t> dims_;
};

// Union-find over node ids; each root keeps its members in ascending order.
class Groups {
 public:
  explicit Groups(size_t n) : parent_(n), members_(n) {
    std::iota(parent_.begin(), parent_.end(), NodeId{0});
    for (NodeId i = 0; i < n; ++i) members_[i] = {i};
  }
  NodeId find(NodeId x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  const std::vector<NodeId>& members(NodeId root) const { return members_[root]; }
  std::vector<NodeId> merged(NodeId a, NodeId b) const {
    std::vector<NodeId> out;
    std::merge(members_[a].begin(), members_[a].end(), members_[b].begin(), members_[b].end(),
               std::back_inserter(out));
    return out;
  }
  void unite(NodeId a, NodeId b, std::vector<NodeId> merged) {
    parent_[b] = a;
    members_[a] = std::move(merged);
    members_[b].clear();
  }

 private:
  std::vector<NodeId> parent_;
  std::vector<std::vector<NodeId>> members_;
};

// True when merging groups a and b would close a cycle: some other group reads
// from one of them and leads, through groups, back to one of them. Merges happen
// while visiting consumers in program order, so when `c` (a member of b) is
// visited every group but a singleton has all its members at or before c; a node
// after c is a singleton group whose readers are after it too, so no path
// through it comes back, and the search skips it. Later sweeps, when groups
// reach past c, pass the graph's size as c: the whole search.
bool creates_cycle(const Analysis& an, Groups& groups, NodeId a, NodeId b, NodeId c,
                   std::vector<uint32_t>& seen, uint32_t stamp) {
  std::vector<NodeId> stack;
  auto visit_readers = [&](NodeId root, bool from_third) {
    for (NodeId m : groups.members(root))
      for (auto [user, index] : an.users[m]) {
        if (user > c || !an.grouped(user)) continue;
        NodeId r = groups.find(user);
        if (r == a || r == b) {
          if (from_third) return true;
          continue;
        }
        if (seen[r] == stamp) continue;
        seen[r] = stamp;
        stack.push_back(r);
      }
    return false;
  };
  visit_readers(a, false);
  visit_readers(b, false);
  while (!stack.empty()) {
    NodeId x = stack.back();
    stack.pop_back();
    if (visit_readers(x, true)) return true;
  }
  return false;
}

// A constant read by a kernel that takes its operands from memory.
bool read_as_buffer(const Analysis& an, NodeId reader) {
  return an.role[reader] == Role::Matmul || an.role[reader] == Role::Opaque;
}

// Builds the FusionGroup for a set of grouped nodes (ascending ids).
class GroupBuilder {
 public:
  explicit GroupBuilder(const Analysis& an) : an_(an), g_(an.g), mark_(an.g.size(), 0) {
    auto mark_external = [&](Value v) {
      auto& slots = external_[v.node];
      if (slots.size() <= v.index) slots.resize(v.index + 1, false);
      slots[v.index] = true;
    };
    external_.resize(g_.size());
    for (Value v : g_.outputs) mark_external(v);
    for (const ParamUpdate& u : g_.updates) mark_external(u.value);
  }

  FusionGroup build(const std::vector<NodeId>& members, GroupKind kind) {
    ++stamp_;
    for (NodeId m : members) mark_[m] = stamp_;
    FusionGroup group;
    group.kind = kind;
    // Constants read by members (not as a buffer) are members too.
    std::vector<NodeId> nodes = members;
    for (NodeId m : members)
      for (Value v : g_[m].operands)
        if (an_.role[v.node] == Role::Constant && !read_as_buffer(an_, m) && !member(v.node)) {
          mark_[v.node] = stamp_;
          nodes.push_back(v.node);
        }
    std::sort(nodes.begin(), nodes.end());
    if (kind == GroupKind::Matmul) {
      auto mm = std::find_if(nodes.begin(), nodes.end(),
                             [&](NodeId id) { return g_[id].op == OpKind::matmul; });
      std::rotate(nodes.begin(), mm, mm + 1);
    }
    group.nodes = std::move(nodes);

    for (NodeId m : group.nodes)
      for (Value v : g_[m].operands)
        if (reads_from_outside(m, v.node) &&
            std::find(group.inputs.begin(), group.inputs.end(), v) == group.inputs.end())
          group.inputs.push_back(v);

    for (NodeId m : group.nodes) {
      // Constants are recomputed by their readers; only a materialising group writes one.
      if (an_.role[m] == Role::Constant && members != std::vector<NodeId>{m}) continue;
      for (uint32_t r = 0; r < g_[m].results.size(); ++r) {
        bool out = r < external_[m].size() && external_[m][r];
        for (auto [user, index] : an_.users[m])
          out = out || (reads_from_outside(user, m) && g_[user].operands[index].index == r);
        if (out) group.outputs.push_back(Value(m, r));
      }
    }
    return group;
  }

 private:
  bool member(NodeId id) const { return mark_[id] == stamp_; }
  // Whether `reader` takes `node`'s value from a buffer rather than computing it in the kernel.
  bool reads_from_outside(NodeId reader, NodeId node) const {
    if (!member(reader)) return true;
    if (!member(node)) return true;
    return an_.role[node] == Role::Constant && read_as_buffer(an_, reader);
  }

  const Analysis& an_;
  const Graph& g_;
  std::vector<uint32_t> mark_;
  uint32_t stamp_ = 0;
  std::vector<std::vector<bool>> external_;  // per node and result: returned or updated
};

}  // namespace

SourceLoc first_loc(const Graph& g, const FusionGroup& group) {
  for (NodeId id : group.nodes)
    if (g.node(id).loc.known()) return g.node(id).loc;
  return {};
}

const char* group_kind_name(GroupKind k) {
  constexpr const char* kNames[] = {"elementwise", "reduction", "matmul", "copy",
                                    "opaque",      "scatter",   "scan"};
  return kNames[static_cast<int>(k)];
}

std::vector<FusionGroup> plan_fusion(const Graph& g, const FusionOptions& opts) {
  Analysis an(g);
  Groups groups(g.size());

  if (opts.enabled) {
    GroupChecker checker(an);
    std::vector<uint32_t> seen(g.size(), 0);
    uint32_t stamp = 0;
    // A second sweep merges whole groups the first could not: a producer read
    // at several places (a conv's taps) joins its consumer only once all of
    // them are in the consumer's group, which the first sweep builds a reader
    // at a time. Only it takes such merges (a member evaluated at several
    // labels), and only those, so the first sweep's groups are the ones a
    // single sweep makes: kernels that do not read a value at several places
    // keep their members, and so their rounding.
    bool merged_any = true;
    for (int sweep = 0; sweep < 2 || merged_any; ++sweep) {
      merged_any = false;
      checker.allow_recompute(sweep > 0);
      for (NodeId c = 0; c < g.size(); ++c) {
        // A scatter_add or a scan takes producers in; nothing takes one in.
        if (!an.grouped(c) || an.role[c] == Role::Opaque) continue;
        for (Value v : g[c].operands) {
          if (!an.grouped(v.node) || an.role[v.node] == Role::Opaque ||
              an.role[v.node] == Role::Scatter || an.role[v.node] == Role::Scan)
            continue;
          NodeId a = groups.find(v.node), b = groups.find(c);
          if (a == b || groups.members(a).size() + groups.members(b).size() > kMaxFusionGroupNodes)
            continue;
          std::vector<NodeId> merged = groups.merged(a, b);
          if (!checker.check(merged) || (sweep > 0 && !checker.recomputes())) continue;
          const NodeId last = sweep == 0 ? c : NodeId(g.size());
          if (creates_cycle(an, groups, a, b, last, seen, ++stamp)) continue;
          groups.unite(a, b, std::move(merged));
          merged_any = sweep > 0;
        }
      }
    }
  }

  // The groups, plus one for each constant that must be materialised.
  std::vector<std::vector<NodeId>> sets;
  std::vector<GroupKind> kinds;
  {
    GroupChecker checker(an);
    for (NodeId id = 0; id < g.size(); ++id) {
      if (an.grouped(id) && groups.find(id) == id) {
        std::optional<GroupKind> kind = checker.check(groups.members(id));
        KILN_CHECK(kind.has_value(), "internal error: fusion formed an invalid group");
        sets.push_back(groups.members(id));
        kinds.push_back(*kind);
      } else if (an.role[id] == Role::Constant) {
        bool materialise = an.external[id];
        for (auto [user, index] : an.users[id])
          materialise = materialise || read_as_buffer(an, user);
        if (materialise) {
          sets.push_back({id});
          kinds.push_back(GroupKind::Elementwise);
        }
      }
    }
  }

  // Topological order of the groups, earliest first member first.
  std::vector<int32_t> group_of(g.size(), -1);
  for (size_t i = 0; i < sets.size(); ++i)
    for (NodeId m : sets[i]) group_of[m] = static_cast<int32_t>(i);
  std::vector<std::vector<size_t>> readers(sets.size());
  std::vector<size_t> pending(sets.size(), 0);
  for (size_t i = 0; i < sets.size(); ++i) {
    std::vector<size_t> from;
    for (NodeId m : sets[i])
      for (Value v : g[m].operands) {
        int32_t p = group_of[v.node];
        if (p < 0 || static_cast<size_t>(p) == i) continue;
        // Constants are recomputed in place unless read as a buffer.
        if (an.role[v.node] == Role::Constant && !read_as_buffer(an, m)) continue;
        from.push_back(static_cast<size_t>(p));
      }
    std::sort(from.begin(), from.end());
    from.erase(std::unique(from.begin(), from.end()), from.end());
    for (size_t p : from) readers[p].push_back(i);
    pending[i] = from.size();
  }
  std::priority_queue<std::pair<NodeId, size_t>, std::vector<std::pair<NodeId, size_t>>,
                      std::greater<>>
      ready;
  for (size_t i = 0; i < sets.size(); ++i)
    if (pending[i] == 0) ready.push({sets[i].front(), i});
  std::vector<FusionGroup> out;
  GroupBuilder builder(an);
  while (!ready.empty()) {
    size_t i = ready.top().second;
    ready.pop();
    out.push_back(builder.build(sets[i], kinds[i]));
    for (size_t r : readers[i])
      if (--pending[r] == 0) ready.push({sets[r].front(), r});
  }
  KILN_CHECK(out.size() == sets.size(), "internal error: fusion groups form a cycle");
  return out;
}

std::string fusion_plan_str(const Graph& g, const std::vector<FusionGroup>& groups) {
  // Value names as the printer writes them: a running number over all results.
  std::vector<uint32_t> first(g.size() + 1, 0);
  for (NodeId i = 0; i < g.size(); ++i)
    first[i + 1] = first[i] + static_cast<uint32_t>(g[i].results.size());
  auto name = [&](Value v) {
    std::string s = "%";  // appended: GCC 12 warns falsely (-Wrestrict) on "%" + ...
    s += std::to_string(first[v.node] + v.index);
    return s;
  };
  std::ostringstream os;
  for (size_t i = 0; i < groups.size(); ++i) {
    const FusionGroup& grp = groups[i];
    os << "group " << i << " (" << group_kind_name(grp.kind) << "):";
    for (NodeId n : grp.nodes) {
      os << " " << name(Value(n));
      // Multi-result members (custom calls) name every result.
      for (uint32_t r = 1; r < g[n].results.size(); ++r) os << "," << name(Value(n, r));
    }
    os << " <-";
    for (Value v : grp.inputs) os << " " << name(v);
    os << " ->";
    for (Value v : grp.outputs) os << " " << name(v);
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln
