// Collective placement (DESIGN.md, "Scheduling is passes"): which gradient
// all_reduces travel together, and where in a compiled plan each bucket starts
// and is waited for, so communication overlaps the rest of the backward pass as
// PyTorch's DistributedDataParallel does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion.h"

namespace kiln {

/// Sets attribute `bucket` on every collective. all_reduces that agree on
/// reduce, dtype, world and bucket_bytes (the data-parallel wrapper sets it) are
/// taken in the order their operands become ready (the operand's position in
/// the graph: the last layer's gradients first) and packed greedily into
/// buckets of at most bucket_bytes; a larger tensor is a bucket of its own.
/// Every other collective is a bucket of its own. Buckets are numbered in
/// readiness order.
Graph bucket_collectives(const Graph& g);

/// Where each bucket runs among a plan's fusion groups.
struct CollectiveSchedule {
  static constexpr size_t kBeforeAll = std::numeric_limits<size_t>::max();
  struct Bucket {
    int64_t id = 0;
    std::vector<size_t> groups;  // the members' groups, in bucket order (consecutive)
    size_t start_after = kBeforeAll;  // start once this group ran (kBeforeAll: first)
  };
  std::vector<Bucket> buckets;  // in the order their groups come
};

/// Moves each bucket's groups (opaque groups of one collective) to just before
/// the first group that reads any member's result, or the end: that is where
/// the plan waits for the bucket, so its operands count as live until then and
/// its results are written there. Each bucket starts right after the last group
/// that produces one of its operands. A bucket whose results are read before all
/// its operands are ready is split into buckets of one. `groups` is reordered in
/// place and keeps a dependency order.
/// With `overlap` false each bucket starts right where it is waited for (the
/// baseline that measures what overlap hides).
CollectiveSchedule schedule_collectives(const Graph& g, std::vector<FusionGroup>& groups,
                                        bool overlap = true);

/// The schedule as text for dumps: one line per bucket, with its members, size,
/// and the groups it starts after and waits before.
std::string collective_schedule_str(const Graph& g, const std::vector<FusionGroup>& groups,
                                    const CollectiveSchedule& s);

}  // namespace kiln
