// SavedValues: what recorded ops saved and the writes into their storages, on
// IR text: which saved values a backward reads, current or stale, and the copy
// eager mode keeps of an operand its own op overwrites.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/saved_values.h"

using namespace kiln;
using passtest::ir;

namespace {

// "node:which" per saved value read, in order.
std::string str(const std::vector<std::pair<NodeId, const SavedValues::Ref*>>& reads) {
  std::string s;
  for (const auto& [id, r] : reads)
    s += (s.empty() ? "" : " ") + std::to_string(id) + ":" + std::to_string(r->which);
  return s;
}

}  // namespace

TEST_CASE("SavedValues: the saved values a backward reads, current or stale after a write") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[3]
    %y = arg {index=1} : f32[3]
    %m = mul %x, %y
    %e = exp %m
    %s = sum %e {dims=[0], keepdim=0}
    return %s
  )");
  auto x = std::make_shared<int>(0), y = std::make_shared<int>(1), m = std::make_shared<int>(2),
       e = std::make_shared<int>(3);
  SavedValues saved;
  saved.record(2, {x, y}, m, {true, true});
  saved.record(3, {m}, e, {true});
  const std::span<const Value> roots(g.outputs);
  // mul reads both operands, exp its result; mul's result and exp's operand are not read.
  CHECK(str(saved.reads(g, roots)) == "2:0 2:1 3:-1");
  CHECK(str(saved.reads(g, roots, /*stale=*/true)).empty());
  CHECK(saved.first_stale(g, roots).node == kNoNode);

  saved.wrote(y.get());
  CHECK(saved.writes(y.get()) == 1);
  CHECK(saved.writes(x.get()) == 0);
  CHECK(str(saved.reads(g, roots)) == "2:0 3:-1");
  CHECK(str(saved.reads(g, roots, /*stale=*/true)) == "2:1");
  const SavedValues::Stale s = saved.first_stale(g, roots);
  CHECK(s.node == 2);
  CHECK(s.expected == 0);
  CHECK(s.found == 1);
  // A root whose gradient reaches none of them reads nothing.
  const Value x_root(0);
  CHECK(str(saved.reads(g, {&x_root, 1})).empty());
}

TEST_CASE("SavedValues: an op's operand 0 overwritten with its own result is kept, never stale") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[3]
    %y = arg {index=1} : f32[3]
    %m = mul %x, %y
    %s = sum %m {dims=[0], keepdim=0}
    return %s
  )");
  auto x = std::make_shared<int>(0), y = std::make_shared<int>(1);
  SavedValues saved;
  saved.record(2, {x, y}, x, {true, true});  // x.mul_(y): the result lands in x
  saved.keep_overwritten(2, y.get());        // not operand 0: nothing kept
  saved.keep_overwritten(2, x.get());
  saved.wrote(x.get());
  const std::span<const Value> roots(g.outputs);
  CHECK(str(saved.reads(g, roots)) == "2:1");
  CHECK(saved.first_stale(g, roots).node == kNoNode);
  // y was not kept (not operand 0): a write into it makes mul's y stale.
  saved.wrote(y.get());
  CHECK(saved.first_stale(g, roots).node == 2);
}
