// Collective bucketing and placement (see collectives.h).
#include "passes/collectives.h"

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "ir/error.h"

namespace kiln {

namespace {

bool is_collective(const Node& n) {
  return op_info(n.op).category == OpCategory::Collective;
}

// The collective a group computes, or -1 (collective groups hold just that node).
int64_t collective_node(const Graph& g, const FusionGroup& grp) {
  if (grp.kind != GroupKind::Opaque || grp.nodes.size() != 1 || !is_collective(g[grp.nodes[0]]))
    return -1;
  return static_cast<int64_t>(grp.nodes[0]);
}

}  // namespace

Graph bucket_collectives(const Graph& input) {
  Graph g = input;
  // Each bucket: its members, first by readiness (operand position).
  std::vector<std::vector<NodeId>> buckets;
  using Key = std::tuple<std::string, DType, int64_t, int64_t>;
  std::map<Key, std::vector<NodeId>> candidates;
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g[id];
    if (!is_collective(n)) continue;
    if (n.op == OpKind::all_reduce && n.attrs.has(AttrKey::bucket_bytes)) {
      Key k{n.attrs.str(AttrKey::reduce), n.type().dtype, n.attrs.i(AttrKey::world),
            n.attrs.i(AttrKey::bucket_bytes)};
      candidates[k].push_back(id);
    } else {
      buckets.push_back({id});
    }
  }
  for (auto& [key, ids] : candidates) {
    std::stable_sort(ids.begin(), ids.end(), [&](NodeId a, NodeId b) {
      return g[a].operands[0].node < g[b].operands[0].node;
    });
    const int64_t cap = std::get<3>(key);
    std::vector<NodeId> current;
    int64_t bytes = 0;
    for (NodeId id : ids) {
      const int64_t b = g[id].type().bytes();
      if (!current.empty() && bytes + b > cap) {
        buckets.push_back(std::move(current));
        current.clear();
        bytes = 0;
      }
      current.push_back(id);
      bytes += b;
    }
    if (!current.empty()) buckets.push_back(std::move(current));
  }
  // Numbered by readiness, then by position.
  auto ready = [&](const std::vector<NodeId>& b) {
    return std::pair(g[b.front()].operands[0].node, b.front());
  };
  std::sort(buckets.begin(), buckets.end(),
            [&](const auto& a, const auto& b) { return ready(a) < ready(b); });
  for (size_t i = 0; i < buckets.size(); ++i)
    for (NodeId id : buckets[i]) g.node(id).attrs.set(AttrKey::bucket, static_cast<int64_t>(i));
  return g;
}

CollectiveSchedule schedule_collectives(const Graph& g, std::vector<FusionGroup>& groups,
                                        bool overlap) {
  const size_t n = groups.size();
  const size_t kEnd = n;
  std::vector<int64_t> producer(g.size(), -1);  // group index writing each node's value
  for (size_t gi = 0; gi < n; ++gi)
    for (Value v : groups[gi].outputs) producer[v.node] = static_cast<int64_t>(gi);
  std::vector<size_t> first_reader(g.size(), kEnd);  // first group reading each node's value
  for (size_t gi = n; gi-- > 0;)
    for (Value v : groups[gi].inputs) first_reader[v.node] = gi;

  // Buckets (by attribute) in the order their first member's group comes.
  struct Pending {
    int64_t id;
    std::vector<size_t> groups;
    int64_t ready = -1;    // original index of the last producing group
    size_t reader = 0;     // original index of the first reading group
  };
  std::vector<Pending> pending;
  std::map<int64_t, size_t> by_id;
  std::vector<char> moved(n, 0);
  for (size_t gi = 0; gi < n; ++gi) {
    const int64_t c = collective_node(g, groups[gi]);
    if (c < 0) continue;
    moved[gi] = 1;
    const int64_t id = g[static_cast<NodeId>(c)].attrs.i(AttrKey::bucket, -1 - static_cast<int64_t>(gi));
    auto [it, fresh] = by_id.try_emplace(id, pending.size());
    if (fresh) pending.push_back(Pending{id, {}, -1, kEnd});
    pending[it->second].groups.push_back(gi);
  }
  std::vector<Pending> buckets;
  auto measure = [&](Pending& b) {
    b.ready = -1;
    b.reader = kEnd;
    for (size_t gi : b.groups) {
      const Node& node = g[groups[gi].nodes[0]];
      b.ready = std::max(b.ready, producer[node.operands[0].node]);
      b.reader = std::min(b.reader, first_reader[groups[gi].nodes[0]]);
    }
  };
  for (Pending& b : pending) {
    measure(b);
    if (b.ready < static_cast<int64_t>(b.reader) || b.groups.size() == 1) {
      buckets.push_back(std::move(b));
      continue;
    }
    for (size_t gi : b.groups) {  // read before it is complete: one bucket per member
      Pending one{b.id, {gi}, -1, kEnd};
      measure(one);
      buckets.push_back(std::move(one));
    }
  }

  // Emit the other groups in order, each bucket just before its first reader.
  std::multimap<size_t, size_t> before;  // reader's original index -> bucket
  for (size_t b = 0; b < buckets.size(); ++b) before.emplace(buckets[b].reader, b);
  std::vector<FusionGroup> order;
  std::vector<size_t> new_index(n, kEnd);
  CollectiveSchedule sched;
  std::vector<size_t> bucket_pos(buckets.size());
  std::function<void(size_t)> emit_before = [&](size_t key) {
    auto [lo, hi] = before.equal_range(key);
    std::vector<size_t> here;
    for (auto it = lo; it != hi; ++it) here.push_back(it->second);
    for (size_t b : here) {
      for (size_t gi : buckets[b].groups) emit_before(gi);  // collectives reading collectives
      bucket_pos[b] = sched.buckets.size();
      CollectiveSchedule::Bucket out;
      out.id = buckets[b].id;
      for (size_t gi : buckets[b].groups) {
        new_index[gi] = order.size();
        out.groups.push_back(order.size());
        order.push_back(groups[gi]);
      }
      sched.buckets.push_back(std::move(out));
    }
  };
  for (size_t gi = 0; gi < n; ++gi) {
    if (moved[gi]) continue;
    emit_before(gi);
    new_index[gi] = order.size();
    order.push_back(groups[gi]);
  }
  emit_before(kEnd);
  KILN_CHECK(order.size() == n, "internal: collective placement lost groups (", order.size(),
             " of ", n, ")");
  for (size_t b = 0; b < buckets.size(); ++b) {
    CollectiveSchedule::Bucket& out = sched.buckets[bucket_pos[b]];
    if (!overlap && out.groups.front() > 0) {
      out.start_after = out.groups.front() - 1;
    } else if (!overlap) {
      out.start_after = CollectiveSchedule::kBeforeAll;
    } else if (buckets[b].ready >= 0) {
      out.start_after = new_index[static_cast<size_t>(buckets[b].ready)];
      KILN_CHECK(out.start_after < out.groups.front(), "internal: bucket ", out.id,
                 " would start after it is waited for");
    }
  }
  groups = std::move(order);
  return sched;
}

std::string collective_schedule_str(const Graph& g, const std::vector<FusionGroup>& groups,
                                    const CollectiveSchedule& s) {
  std::ostringstream os;
  for (const auto& b : s.buckets) {
    int64_t bytes = 0;
    os << "bucket " << b.id << ": " << op_name(g[groups[b.groups.front()].nodes[0]].op);
    for (size_t gi : b.groups) {
      const NodeId id = groups[gi].nodes[0];
      os << " %" << id;
      bytes += g[id].type().bytes();
    }
    os << " (" << b.groups.size() << (b.groups.size() == 1 ? " tensor, " : " tensors, ") << bytes
       << " bytes): starts ";
    if (b.start_after == CollectiveSchedule::kBeforeAll)
      os << "before group 0";
    else
      os << "after group " << b.start_after;
    os << ", waited for at group " << b.groups.front() << " (of " << groups.size() << ")\n";
  }
  return os.str();
}

}  // namespace kiln
