// Memory planning: a linear scan over the groups in order. Before a group runs,
// each of its outputs takes a buffer: a fresh one for graph outputs and update
// values, otherwise the best fit from the free buffers of its device (the
// smallest one large enough, else the largest one, grown). After the group, the
// buffers of values it read for the last time go back to the free list.
#include "passes/memory_plan.h"

#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

namespace {

int64_t value_bytes(const Graph& g, Value v) {
  const TensorType& t = g.type(v);
  return t.bytes();
}

class Planner {
 public:
  explicit Planner(MemoryPlan& plan) : plan_(plan) {}

  int32_t fresh(int64_t bytes, Device device) {
    plan_.buffer_bytes.push_back(bytes);
    plan_.buffer_device.push_back(device);
    return static_cast<int32_t>(plan_.buffer_bytes.size() - 1);
  }

  int32_t reuse_or_fresh(int64_t bytes, Device device) {
    int best = -1, largest = -1;
    for (size_t i = 0; i < free_.size(); ++i) {
      int32_t b = free_[i];
      if (plan_.buffer_device[b] != device) continue;
      int64_t have = plan_.buffer_bytes[b];
      if (have >= bytes && (best < 0 || have < plan_.buffer_bytes[free_[best]]))
        best = static_cast<int>(i);
      if (largest < 0 || have > plan_.buffer_bytes[free_[largest]]) largest = static_cast<int>(i);
    }
    int pick = best >= 0 ? best : largest;
    if (pick < 0) return fresh(bytes, device);
    int32_t b = free_[pick];
    free_.erase(free_.begin() + pick);
    plan_.buffer_bytes[b] = std::max(plan_.buffer_bytes[b], bytes);
    return b;
  }

  void release(int32_t b) { free_.push_back(b); }

 private:
  MemoryPlan& plan_;
  std::vector<int32_t> free_;
};

}  // namespace

int64_t MemoryPlan::planned_bytes() const {
  int64_t total = 0;
  for (int64_t b : buffer_bytes) total += b;
  return total;
}

MemoryPlan plan_memory(const Graph& g, const std::vector<FusionGroup>& groups,
                       const std::unordered_map<Value, Value, ValueHash>& kept_in) {
  std::unordered_set<Value, ValueHash> dedicated(g.outputs.begin(), g.outputs.end());
  for (const ParamUpdate& u : g.updates) dedicated.insert(u.value);
  std::unordered_map<Value, size_t, ValueHash> last_read;
  auto held = [&](Value v) {
    auto k = kept_in.find(v);
    return k == kept_in.end() ? v : k->second;
  };
  for (size_t i = 0; i < groups.size(); ++i)
    for (Value v : groups[i].inputs) last_read[held(v)] = i;

  MemoryPlan plan;
  Planner planner(plan);
  std::unordered_map<Value, int32_t, ValueHash> buffer_of;
  for (size_t i = 0; i < groups.size(); ++i) {
    std::vector<int32_t>& assigned = plan.group_output_buffer.emplace_back();
    for (Value v : groups[i].outputs) {
      int64_t bytes = value_bytes(g, v);
      Device device = g.type(v).device;
      plan.naive_bytes += bytes;
      int32_t b =
          dedicated.count(v) ? planner.fresh(bytes, device) : planner.reuse_or_fresh(bytes, device);
      assigned.push_back(b);
      buffer_of[v] = b;
    }
    auto release_if_done = [&](Value v) {
      auto buf = buffer_of.find(v);
      if (buf == buffer_of.end() || dedicated.count(v)) return;
      auto last = last_read.find(v);
      if (last == last_read.end() || last->second == i) {
        planner.release(buf->second);
        buffer_of.erase(buf);
      }
    };
    for (Value v : groups[i].inputs) release_if_done(held(v));
    for (Value v : groups[i].outputs)
      if (!last_read.count(v)) release_if_done(v);
  }
  return plan;
}

std::string memory_plan_str(const MemoryPlan& p) {
  std::ostringstream os;
  os << "memory plan: " << p.buffer_bytes.size() << " buffers, " << p.planned_bytes()
     << " bytes planned, " << p.naive_bytes << " bytes naive\n";
  for (size_t b = 0; b < p.buffer_bytes.size(); ++b) {
    os << "  buffer " << b << ": " << p.buffer_bytes[b] << " bytes";
    if (!p.buffer_device[b].is_cpu()) os << " on " << p.buffer_device[b].str();
    os << "\n";
  }
  for (size_t i = 0; i < p.group_output_buffer.size(); ++i) {
    os << "  group " << i << " writes";
    for (int32_t b : p.group_output_buffer[i]) os << " b" << b;
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln
