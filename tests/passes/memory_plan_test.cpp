// plan_memory: buffer reuse by liveness over the group order.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "pass_test_util.h"
#include "passes/memory_plan.h"

using namespace kiln;
using passtest::ir;

TEST_CASE("memory plan: a chain reuses two buffers") {
  // Six f32[256] values in a chain: each step reads the previous one only, so two
  // buffers alternate; the returned value gets its own.
  Graph g = ir(R"(
    %x = arg {index=0} : f32[256]
    %a = exp %x
    %b = neg %a
    %c = tanh %b
    %d = relu %c
    %e = sin %d
    %f = cos %e
    return %f
  )");
  std::vector<FusionGroup> groups = plan_fusion(g, FusionOptions{false});
  MemoryPlan p = plan_memory(g, groups);
  REQUIRE(p.group_output_buffer.size() == 6);
  CHECK(p.naive_bytes == 6 * 1024);
  CHECK(p.buffer_bytes.size() == 3);
  CHECK(p.planned_bytes() == 3 * 1024);
  CHECK(memory_plan_str(p) ==
        "memory plan: 3 buffers, 3072 bytes planned, 6144 bytes naive\n"
        "  buffer 0: 1024 bytes\n"
        "  buffer 1: 1024 bytes\n"
        "  buffer 2: 1024 bytes\n"
        "  group 0 writes b0\n"
        "  group 1 writes b1\n"
        "  group 2 writes b0\n"
        "  group 3 writes b1\n"
        "  group 4 writes b0\n"
        "  group 5 writes b2\n");
  // Fused, the chain is one kernel and writes only the output.
  MemoryPlan fused = plan_memory(g, plan_fusion(g));
  CHECK(fused.buffer_bytes == std::vector<int64_t>{1024});
}

TEST_CASE("memory plan: outputs and updates are never shared, even when dead early") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[64]
    %w = param {index=0} : f32[64]
    %a = exp %x
    %b = neg %a
    %c = tanh %b
    %d = sub %w, %c
    %e = sin %d
    %f = cos %e
    return %a, %e, %a
    update 0 = %d
  )");
  std::vector<FusionGroup> groups = plan_fusion(g, FusionOptions{false});
  MemoryPlan p = plan_memory(g, groups);
  std::map<std::pair<NodeId, uint32_t>, int32_t> buffer;
  for (size_t i = 0; i < groups.size(); ++i)
    for (size_t k = 0; k < groups[i].outputs.size(); ++k)
      buffer[{groups[i].outputs[k].node, groups[i].outputs[k].index}] = p.group_output_buffer[i][k];
  std::set<int32_t> dedicated;
  for (Value v : {Value(2), Value(6), Value(5)}) dedicated.insert(buffer.at({v.node, v.index}));
  CHECK(dedicated.size() == 3);
  for (auto [value, b] : buffer) {
    bool is_dedicated_value = value.first == 2 || value.first == 5 || value.first == 6;
    if (!is_dedicated_value) CHECK(dedicated.count(b) == 0);
  }
  // %7 (cos) is unused, not even returned: it is dead, in no group.
  CHECK(groups.size() == 5);
}

TEST_CASE("memory plan: a value stays live until its last reader; sizes are best fit") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[100]
    %a = exp %x
    %s = sum %a {dims=[0], keepdim=0}
    %b = neg %a
    %c = mul %b, %s
    %small = reshape %s {shape=[1]}
    %t = add %c, %small
    return %t
  )");
  std::vector<FusionGroup> groups = plan_fusion(g, FusionOptions{false});
  MemoryPlan p = plan_memory(g, groups);
  REQUIRE(groups.size() == 6);
  // a (400 bytes) is read by s and b; s (4 bytes) by c and small.
  int32_t a = p.group_output_buffer[0][0], s = p.group_output_buffer[1][0],
          b = p.group_output_buffer[2][0], c = p.group_output_buffer[3][0],
          small = p.group_output_buffer[4][0], t = p.group_output_buffer[5][0];
  CHECK(a != s);
  CHECK(b != a);
  CHECK(b != s);
  CHECK(c == a);      // a died after b: its buffer fits c exactly
  CHECK(small != s);  // s is still live (read by small itself)
  CHECK(small != c);
  CHECK(small == b);  // b died after c
  CHECK(t != c);      // the output has its own buffer
  CHECK(p.buffer_bytes.at(t) == 400);
  CHECK(p.naive_bytes == 400 + 4 + 400 + 400 + 4 + 400);
  CHECK(p.planned_bytes() < p.naive_bytes);
}
