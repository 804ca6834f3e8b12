// Memory planning: assigns the values that kernels write to buffers, reusing a
// buffer once every reader of its previous value has run (liveness over the
// group order). Graph outputs and parameter updates get buffers of their own.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "passes/fusion.h"

namespace kiln {

struct MemoryPlan {
  /// For each group, for each of its outputs, the buffer it writes.
  std::vector<std::vector<int32_t>> group_output_buffer;
  /// Byte size of each buffer.
  std::vector<int64_t> buffer_bytes;
  /// Device of each buffer (buffers are reused only on their own device).
  std::vector<Device> buffer_device;
  /// Bytes an unplanned executor would allocate (one buffer per value), for reporting.
  int64_t naive_bytes = 0;
  int64_t planned_bytes() const;
};

/// Plans buffers for the group outputs in order. Values that are graph outputs
/// never share a buffer with anything else. `kept_in` maps a value no group
/// writes to the value whose buffer holds it (a folded reshape,
/// schedule.h): a group that reads the one reads the other's buffer.
MemoryPlan plan_memory(const Graph& g, const std::vector<FusionGroup>& groups,
                       const std::unordered_map<Value, Value, ValueHash>& kept_in = {});

std::string memory_plan_str(const MemoryPlan& p);

}  // namespace kiln
