// Collective bucketing and placement: IR text in, expected text (or schedule) out.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/collectives.h"
#include "passes/fusion.h"

using namespace kiln;
using passtest::ir;
using passtest::run_on;

namespace {

// Three gradients (16, 24 and 64 bytes) ready in the order %g2, %g1, %g0 (their
// position in the graph), each averaged with a 48-byte bucket cap, then an SGD step.
const char* kStep = R"(
  %x = arg {index=0} : f32[4]
  %w0 = param {index=0} : f32[16]
  %w1 = param {index=1} : f32[6]
  %w2 = param {index=2} : f32[4]
  %c = constant {value=0.5} : f32[]
  %g2 = mul %x, %c
  %g1 = reshape %w1 {shape=[6]}
  %e = exp %w0
  %g0 = mul %e, %c
  %a0 = all_reduce %g0 {reduce="avg", world=2, bucket_bytes=48}
  %a1 = all_reduce %g1 {reduce="avg", world=2, bucket_bytes=48}
  %a2 = all_reduce %g2 {reduce="avg", world=2, bucket_bytes=48}
  %n0 = sub %w0, %a0
  %n1 = sub %w1, %a1
  %n2 = sub %w2, %a2
  return %x
  update 0 = %n0
  update 1 = %n1
  update 2 = %n2
)";

}  // namespace

TEST_CASE("bucket_collectives packs gradient all_reduces in readiness order up to the cap") {
  const std::string out = run_on(bucket_collectives, kStep);
  // %g2 (16 B) and %g1 (24 B) share bucket 0; %g0 (64 B) is larger than the cap: bucket 1.
  CHECK(out.find("all_reduce %5 {reduce=\"avg\", world=2, bucket=0, bucket_bytes=48}") != std::string::npos);
  CHECK(out.find("all_reduce %6 {reduce=\"avg\", world=2, bucket=0, bucket_bytes=48}") != std::string::npos);
  CHECK(out.find("all_reduce %8 {reduce=\"avg\", world=2, bucket=1, bucket_bytes=48}") != std::string::npos);
}

TEST_CASE("bucket_collectives keeps other collectives and other reductions in buckets of their own") {
  const std::string out = run_on(bucket_collectives, R"(
    %x = arg {index=0} : f32[4]
    %y = arg {index=1} : f64[4]
    %a = all_reduce %x {reduce="sum", world=2, bucket_bytes=1000}
    %b = all_reduce %x {reduce="avg", world=2, bucket_bytes=1000}
    %c = all_reduce %y {reduce="avg", world=2, bucket_bytes=1000}
    %d = broadcast %x {root=1, world=2}
    %e = all_gather %x {world=2}
    return %a, %b, %c, %d, %e
  )");
  for (const char* want : {"bucket=0", "bucket=1", "bucket=2", "bucket=3", "bucket=4"})
    CHECK(out.find(want) != std::string::npos);
  // Numbered by readiness (the operand's position), then by position.
  CHECK(out.find("all_reduce %0 {reduce=\"sum\", world=2, bucket=0, bucket_bytes=1000}") != std::string::npos);
  CHECK(out.find("all_gather %0 {world=2, bucket=3} : f32[8]") != std::string::npos);
  CHECK(out.find("all_reduce %1 {reduce=\"avg\", world=2, bucket=4, bucket_bytes=1000} : f64[4]") != std::string::npos);
}

TEST_CASE("schedule_collectives starts a bucket after its last producer and waits before its first reader") {
  Graph g = bucket_collectives(ir(kStep));
  std::vector<FusionGroup> groups = plan_fusion(g);
  const size_t n = groups.size();
  CollectiveSchedule s = schedule_collectives(g, groups);
  REQUIRE(groups.size() == n);
  REQUIRE(s.buckets.size() == 2);
  // Every group still comes after the groups it reads.
  std::vector<size_t> written_by(g.size(), SIZE_MAX);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    for (Value v : groups[gi].inputs)
      if (op_info(g[v.node].op).category != OpCategory::Input) CHECK(written_by[v.node] < gi);
    for (Value v : groups[gi].outputs) written_by[v.node] = gi;
  }
  for (const auto& b : s.buckets) {
    CAPTURE(b.id);
    // The members sit together, after the group that starts them and before their readers.
    for (size_t k = 1; k < b.groups.size(); ++k) CHECK(b.groups[k] == b.groups[k - 1] + 1);
    if (b.start_after != CollectiveSchedule::kBeforeAll) CHECK(b.start_after < b.groups.front());
    const NodeId last = groups[b.groups.back()].nodes[0];
    for (size_t gi = 0; gi < b.groups.front(); ++gi)
      for (Value v : groups[gi].inputs) CHECK(v.node != last);
  }
  // Bucket 0 (%g2 and %g1, ready early) starts before the exp that %g0 needs.
  const auto& first = s.buckets[0].id == 0 ? s.buckets[0] : s.buckets[1];
  size_t exp_group = SIZE_MAX;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (NodeId id : groups[gi].nodes)
      if (g[id].op == OpKind::exp) exp_group = gi;
  REQUIRE(exp_group != SIZE_MAX);
  CHECK((first.start_after == CollectiveSchedule::kBeforeAll || first.start_after < exp_group));
  CHECK(first.groups.front() > exp_group);
  const std::string text = collective_schedule_str(g, groups, s);
  CHECK(text.find("bucket 0: all_reduce") != std::string::npos);
  CHECK(text.find("(2 tensors, 40 bytes)") != std::string::npos);
}

TEST_CASE("a bucket read before all its operands are ready is split into buckets of one") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[4]
    %a = all_reduce %x {reduce="sum", world=2, bucket=0}
    %y = exp %a
    %b = all_reduce %y {reduce="sum", world=2, bucket=0}
    return %b
  )");
  std::vector<FusionGroup> groups = plan_fusion(g);
  CollectiveSchedule s = schedule_collectives(g, groups);
  CHECK(s.buckets.size() == 2);
  for (const auto& b : s.buckets) CHECK(b.groups.size() == 1);
}

TEST_CASE("collective ops check their operands and attributes") {
  CHECK_THROWS_WITH_AS(ir("%x = arg {index=0} : bool[4]\n%a = all_reduce %x {reduce=\"sum\", world=2}\nreturn %a"),
                       doctest::Contains("expected a numeric tensor, got bool"), Error);
  CHECK_THROWS_WITH_AS(ir("%x = arg {index=0} : i64[4]\n%a = all_reduce %x {reduce=\"avg\", world=2}\nreturn %a"),
                       doctest::Contains("floating-point tensor for reduce avg"), Error);
  CHECK_THROWS_WITH_AS(ir("%x = arg {index=0} : f32[4]\n%a = all_reduce %x {reduce=\"mean\", world=2}\nreturn %a"),
                       doctest::Contains("expected reduce sum, avg, max or min, got 'mean'"), Error);
  CHECK_THROWS_WITH_AS(ir("%x = arg {index=0} : f32[5]\n%a = reduce_scatter %x {reduce=\"sum\", world=2}\nreturn %a"),
                       doctest::Contains("divisible by the world size 2"), Error);
  CHECK_THROWS_WITH_AS(ir("%x = arg {index=0} : f32[4]\n%a = broadcast %x {root=2, world=2}\nreturn %a"),
                       doctest::Contains("expected a root rank in [0, 2), got 2"), Error);
}
