// plan_fusion: which nodes become one kernel. Cases are IR text in and the
// plan's listing out, plus structural checks on every plan (coverage, order,
// inputs and outputs) and a randomized test on seeded random graphs.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "pass_test_util.h"
#include "passes/fusion.h"

using namespace kiln;
using passtest::ir;

namespace {

// Checks what every plan must satisfy:
// - every needed non-input node is in exactly one group (constants: at least one);
// - groups are in dependency order: each input is a graph input, or an output of
//   an earlier group; no group reads its own output;
// - inputs are exactly the values members read from outside (constants are
//   members unless a matmul or custom call reads them as a buffer);
// - outputs are exactly the member values used outside, returned, or updated;
// - matmul groups start with their matmul; kinds match their members.
void check_plan(const Graph& g, const std::vector<FusionGroup>& groups) {
  std::vector<bool> needed(g.size(), false);
  for (Value v : g.outputs) needed[v.node] = true;
  for (const ParamUpdate& u : g.updates) needed[u.value.node] = true;
  for (NodeId id = static_cast<NodeId>(g.size()); id-- > 0;)
    if (needed[id])
      for (Value v : g[id].operands) needed[v.node] = true;

  std::vector<int> times(g.size(), 0);
  std::map<std::pair<NodeId, uint32_t>, size_t> written_by;
  auto is_input = [&](NodeId id) { return g[id].op == OpKind::arg || g[id].op == OpKind::param; };
  auto reads_buffer = [&](NodeId id) {
    return g[id].op == OpKind::matmul || g[id].op == OpKind::custom;
  };
  std::set<std::pair<NodeId, uint32_t>> returned;
  for (Value v : g.outputs) returned.insert({v.node, v.index});
  for (const ParamUpdate& u : g.updates) returned.insert({u.value.node, u.value.index});

  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const FusionGroup& grp = groups[gi];
    CAPTURE(gi);
    CAPTURE(fusion_plan_str(g, groups));
    REQUIRE(!grp.nodes.empty());
    CHECK(!grp.outputs.empty());
    std::set<NodeId> members(grp.nodes.begin(), grp.nodes.end());
    CHECK(members.size() == grp.nodes.size());
    for (NodeId m : grp.nodes) {
      CHECK(needed[m]);
      CHECK_FALSE(is_input(m));
      ++times[m];
    }
    // Topological order of members (a matmul group's matmul first, reading nothing inside).
    for (size_t i = 0; i < grp.nodes.size(); ++i)
      for (Value v : g[grp.nodes[i]].operands)
        if (members.count(v.node) &&
            !(g[v.node].op == OpKind::constant && reads_buffer(grp.nodes[i]))) {
          auto pos = std::find(grp.nodes.begin(), grp.nodes.end(), v.node) - grp.nodes.begin();
          CHECK(static_cast<size_t>(pos) < i);
        }
    if (grp.kind == GroupKind::Matmul) CHECK(g[grp.nodes[0]].op == OpKind::matmul);
    size_t matmuls = 0, reductions = 0, opaque = 0, movement = 0, others = 0;
    for (NodeId m : grp.nodes) {
      OpCategory c = op_info(g[m].op).category;
      if (g[m].op == OpKind::constant) continue;
      if (c == OpCategory::Matmul)
        ++matmuls;
      else if (c == OpCategory::Reduce)
        ++reductions;
      else if (c == OpCategory::Custom || c == OpCategory::Check || g[m].op == OpKind::literal)
        ++opaque;
      else if (c == OpCategory::Movement)
        ++movement;
      else
        ++others;
    }
    switch (grp.kind) {
      case GroupKind::Opaque:
        CHECK(grp.nodes.size() == 1);
        CHECK(opaque == 1);
        break;
      case GroupKind::Matmul:
        CHECK(matmuls == 1);
        CHECK(reductions + opaque == 0);
        break;
      case GroupKind::Reduction:
        CHECK(reductions >= 1);
        CHECK(matmuls + opaque == 0);
        break;
      case GroupKind::Copy:
        CHECK(movement >= 1);
        CHECK(matmuls + reductions + opaque + others == 0);
        break;
      case GroupKind::Elementwise:
        CHECK(matmuls + reductions + opaque == 0);
        break;
    }

    // Inputs: exactly the values read from outside, each available already.
    std::vector<Value> want_inputs;
    for (NodeId m : grp.nodes) {
      if (g[m].op == OpKind::constant) continue;
      for (Value v : g[m].operands) {
        bool outside =
            !members.count(v.node) || (g[v.node].op == OpKind::constant && reads_buffer(m));
        if (outside && std::find(want_inputs.begin(), want_inputs.end(), v) == want_inputs.end())
          want_inputs.push_back(v);
      }
    }
    CHECK(grp.inputs == want_inputs);
    for (Value v : grp.inputs) {
      CAPTURE(v.node);
      if (is_input(v.node)) continue;
      auto it = written_by.find({v.node, v.index});
      REQUIRE(it != written_by.end());
      CHECK(it->second < gi);
    }
    // Outputs: exactly the values needed outside. A constant is an output only of
    // the group of its own that materialises it.
    std::vector<Value> want_outputs;
    for (NodeId m : grp.nodes) {
      bool is_constant = g[m].op == OpKind::constant;
      bool materialised = is_constant && grp.nodes.size() == 1;
      if (is_constant && !materialised) continue;
      for (uint32_t r = 0; r < g[m].results.size(); ++r) {
        bool out = returned.count({m, r}) > 0;
        for (NodeId u = 0; u < g.size(); ++u)
          if (needed[u] && (materialised || !members.count(u)))
            for (Value v : g[u].operands) out = out || v == Value(m, r);
        if (out) want_outputs.push_back(Value(m, r));
      }
    }
    CHECK(grp.outputs == want_outputs);
    for (Value v : grp.outputs) {
      CHECK(!written_by.count({v.node, v.index}));
      written_by[{v.node, v.index}] = gi;
    }
  }
  for (NodeId id = 0; id < g.size(); ++id) {
    CAPTURE(id);
    if (!needed[id] || is_input(id)) {
      CHECK(times[id] == 0);
    } else if (g[id].op == OpKind::constant) {
      CHECK(times[id] >= 1);
    } else {
      CHECK(times[id] == 1);
    }
  }
}

std::vector<FusionGroup> plan(const Graph& g, bool enabled = true) {
  std::vector<FusionGroup> groups = plan_fusion(g, FusionOptions{enabled});
  check_plan(g, groups);
  return groups;
}

std::string plan_text(const char* text, bool enabled = true) {
  Graph g = ir(text);
  return fusion_plan_str(g, plan(g, enabled));
}

}  // namespace

TEST_CASE("fusion: an 8-op elementwise chain is one group") {
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[64,100]
    %y = arg {index=1} : f32[64,100]
    %c = constant {value=2.0} : f32[]
    %1 = exp %x
    %2 = mul %1, %c
    %3 = add %2, %y
    %4 = tanh %3
    %5 = sigmoid %4
    %6 = neg %5
    %7 = relu %6
    %8 = sub %7, %x
    return %8
  )") == "group 0 (elementwise): %2 %3 %4 %5 %6 %7 %8 %9 %10 <- %0 %1 -> %10\n");
}

TEST_CASE("fusion: softmax over rows is one reduction group") {
  const char* keepdim = R"(
    %x = arg {index=0} : f32[32,128]
    %m = max %x {dims=[1], keepdim=1}
    %s = sub %x, %m
    %e = exp %s
    %t = sum %e {dims=[1], keepdim=1}
    %y = div %e, %t
    return %y
  )";
  CHECK(plan_text(keepdim) == "group 0 (reduction): %1 %2 %3 %4 %5 <- %0 -> %5\n");
  // The same without keepdim: reshapes and expands re-insert the reduced dim.
  const char* reshaped = R"(
    %x = arg {index=0} : f32[32,128]
    %m = max %x {dims=[-1], keepdim=0}
    %mr = reshape %m {shape=[32, 1]}
    %mb = expand %mr {shape=[32, 128]}
    %s = sub %x, %mb
    %e = exp %s
    %t = sum %e {dims=[1], keepdim=0}
    %tr = reshape %t {shape=[32, 1]}
    %y = div %e, %tr
    return %y
  )";
  CHECK(plan_text(reshaped) == "group 0 (reduction): %1 %2 %3 %4 %5 %6 %7 %8 <- %0 -> %8\n");
}

TEST_CASE("fusion: log_softmax is one reduction group") {
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[32,128]
    %m = max %x {dims=[1], keepdim=1}
    %s = sub %x, %m
    %e = exp %s
    %t = sum %e {dims=[1], keepdim=1}
    %l = log %t
    %y = sub %s, %l
    return %y
  )") == "group 0 (reduction): %1 %2 %3 %4 %5 %6 <- %0 -> %6\n");
}

TEST_CASE("fusion: mean/variance normalisation (layer norm) is at most two groups") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[16,64]
    %gamma = param {index=0} : f32[64]
    %beta = param {index=1} : f32[64]
    %n = constant {value=64.0} : f32[]
    %eps = constant {value=1e-05} : f32[]
    %s1 = sum %x {dims=[1], keepdim=1}
    %mean = div %s1, %n
    %xc = sub %x, %mean
    %sq = mul %xc, %xc
    %s2 = sum %sq {dims=[1], keepdim=1}
    %var = div %s2, %n
    %ve = add %var, %eps
    %sd = sqrt %ve
    %xn = div %xc, %sd
    %scaled = mul %xn, %gamma
    %y = add %scaled, %beta
    return %y
  )");
  std::vector<FusionGroup> groups = plan(g);
  CHECK(groups.size() <= 2);
  CHECK(fusion_plan_str(g, groups) ==
        "group 0 (reduction): %3 %4 %5 %6 %7 %8 %9 %10 %11 %12 %13 %14 %15 <- %0 %1 %2 -> %15\n");
}

TEST_CASE("fusion: mean squared error over all dims is one reduction group") {
  CHECK(plan_text(R"(
    %p = arg {index=0} : f32[8,10]
    %t = arg {index=1} : f32[8,10]
    %d = sub %p, %t
    %sq = mul %d, %d
    %s = sum %sq {dims=[0, 1], keepdim=0}
    %n = constant {value=80.0} : f32[]
    %mse = div %s, %n
    return %mse
  )") == "group 0 (reduction): %2 %3 %4 %5 %6 <- %0 %1 -> %6\n");
}

TEST_CASE("fusion: an MLP layer, matmul + bias + relu, is one matmul group") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[64,1000]
    %w = param {index=0} : f32[1000,100]
    %b = param {index=1} : f32[100]
    %h = matmul %x, %w
    %bb = expand %b {shape=[64, 100]}
    %hb = add %h, %bb
    %zero = constant {value=0.0} : f32[]
    %r = maximum %hb, %zero
    return %r
  )");
  std::vector<FusionGroup> groups = plan(g);
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].kind == GroupKind::Matmul);
  CHECK(fusion_plan_str(g, groups) == "group 0 (matmul): %3 %4 %5 %6 %7 <- %0 %1 %2 -> %7\n");
  // With an implicit broadcast of the bias and relu.
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[64,1000]
    %w = param {index=0} : f32[1000,100]
    %b = param {index=1} : f32[100]
    %h = matmul %x, %w
    %hb = add %h, %b
    %r = relu %hb
    return %r
  )") == "group 0 (matmul): %3 %4 %5 <- %0 %1 %2 -> %5\n");
}

TEST_CASE("fusion: a matmul whose result another group reads takes no epilogue") {
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[8,16]
    %w = param {index=0} : f32[16,4]
    %h = matmul %x, %w
    %r = relu %h
    %e = exp %h
    %s = sum %e {dims=[1], keepdim=0}
    return %r, %s
  )") == "group 0 (matmul): %2 <- %0 %1 -> %2\n"
         "group 1 (elementwise): %3 <- %2 -> %3\n"
         "group 2 (reduction): %4 %5 <- %2 -> %5\n");
}

TEST_CASE("fusion: a matmul returned or updated keeps its epilogue, both outputs of its group") {
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[8,16]
    %w = param {index=0} : f32[16,4]
    %h = matmul %x, %w
    %r = relu %h
    return %h, %r
  )") == "group 0 (matmul): %2 %3 <- %0 %1 -> %2 %3\n");
  // A weight gradient kept as the `.grad` parameter and read by the
  // optimizer's update of the weight: one group.
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[8,16]
    %g = arg {index=1} : f32[8,4]
    %w = param {index=0} : f32[16,4]
    %wg = param {index=1} : f32[16,4]
    %xt = permute %x {perm=[1,0]} : f32[16,8]
    %d = matmul %xt, %g
    %c = constant {value=0.5} : f32[]
    %s = mul %d, %c
    %n = sub %w, %s
    return %x
    update 0 = %n
    update 1 = %d
  )") == "group 0 (copy): %4 <- %0 -> %4\n"
         "group 1 (matmul): %5 %6 %7 %8 <- %4 %1 %2 -> %5 %8\n");
}

TEST_CASE("fusion: a diamond fuses into one group") {
  CHECK(plan_text(R"(
    %in = arg {index=0} : f32[10,20]
    %x = exp %in
    %a = sin %x
    %b = cos %x
    %c = add %a, %b
    return %c
  )") == "group 0 (elementwise): %1 %2 %3 %4 <- %0 -> %4\n");
}

TEST_CASE("fusion: a value used by two reductions over different dims is materialised once") {
  CHECK(plan_text(R"(
    %in = arg {index=0} : f32[10,20]
    %x = exp %in
    %rows = sum %x {dims=[1], keepdim=0}
    %cols = sum %x {dims=[0], keepdim=0}
    return %rows, %cols
  )") == "group 0 (reduction): %1 %2 <- %0 -> %1 %2\n"
         "group 1 (reduction): %3 <- %1 -> %3\n");
  // Over the same dims, both reductions join one group.
  CHECK(plan_text(R"(
    %in = arg {index=0} : f32[10,20]
    %x = exp %in
    %s = sum %x {dims=[1], keepdim=0}
    %m = max %x {dims=[1], keepdim=0}
    %r = div %s, %m
    return %r
  )") == "group 0 (reduction): %1 %2 %3 %4 <- %0 -> %4\n");
}

TEST_CASE("fusion: broadcast producers fuse only when cheap and read once") {
  // A cheap bias computation is recomputed in the big group.
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[64,100]
    %b = arg {index=1} : f32[100]
    %c = constant {value=2.0} : f32[]
    %b2 = mul %b, %c
    %y = add %x, %b2
    return %y
  )") == "group 0 (elementwise): %2 %3 %4 <- %1 %0 -> %4\n");
  // An expensive one (exp) runs once at its own size.
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[64,100]
    %b = arg {index=1} : f32[100]
    %eb = exp %b
    %y = add %x, %eb
    return %y
  )") == "group 0 (elementwise): %2 <- %1 -> %2\n"
         "group 1 (elementwise): %3 <- %0 %2 -> %3\n");
  // A cheap one read by two consumers is materialised, not recomputed.
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[64,100]
    %b = arg {index=1} : f32[100]
    %nb = neg %b
    %y = add %x, %nb
    %z = mul %y, %nb
    return %z
  )") == "group 0 (elementwise): %2 <- %1 -> %2\n"
         "group 1 (elementwise): %3 %4 <- %0 %2 -> %4\n");
}

TEST_CASE("fusion: a value read at two different indices is not duplicated") {
  CHECK(plan_text(R"(
    %in = arg {index=0} : f32[8,8]
    %x = exp %in
    %t = permute %x {perm=[1, 0]}
    %y = add %x, %t
    return %y
  )") == "group 0 (elementwise): %1 <- %0 -> %1\n"
         "group 1 (elementwise): %2 %3 <- %1 -> %3\n");
  // Read through a reshape, the linear index is the same: one group.
  CHECK(plan_text(R"(
    %in = arg {index=0} : f32[64]
    %x = exp %in
    %r = reshape %x {shape=[8, 8]}
    %y = neg %r
    return %y
  )") == "group 0 (elementwise): %1 %2 %3 <- %0 -> %3\n");
}

TEST_CASE("fusion: outputs of an elementwise group share one size, reshapes written in place") {
  CHECK(plan_text(R"(
    %in = arg {index=0} : f32[8,8]
    %x = exp %in
    %r = reshape %x {shape=[64]}
    %y = neg %x
    return %r, %y
  )") == "group 0 (elementwise): %1 %2 %3 <- %0 -> %2 %3\n");
  // A smaller output is not a reshape of the space: a group of its own.
  CHECK(plan_text(R"(
    %in = arg {index=0} : f32[8,8]
    %x = exp %in
    %r = slice %x {dim=0, start=0, end=4, step=1}
    %y = neg %x
    return %r, %y
  )") == "group 0 (elementwise): %1 %3 <- %0 -> %1 %3\n"
         "group 1 (copy): %2 <- %1 -> %2\n");
}

// A padded row's taps (a conv's windows, one dim): the pad is read at three
// places. Rows of 34 are recomputed at each (index arithmetic and one load);
// rows of 6 are padded once by a copy kernel; a value computed by arithmetic is
// never recomputed, whatever its rows.
TEST_CASE(
    "fusion: a padded row read at several taps fuses into its reader when its rows are long") {
  // %p, of rows of `n` + 2, read at taps 0, 1 and 2 of each output element.
  auto taps = [](int n, const std::string& producer) {
    const std::string w = std::to_string(n);
    auto tap = [&](int a) {
      return "{dim=1, start=" + std::to_string(a) + ", end=" + std::to_string(a + n) +
             ", step=1}\n";
    };
    return plan_text(("%x = arg {index=0} : f32[4," + w + "]\n" + producer + "%a = slice %p " +
                      tap(0) + "%b = slice %p " + tap(1) + "%c = slice %p " + tap(2) +
                      "%s = add %a, %b\n%t = add %s, %c\nreturn %t\n")
                         .c_str());
  };
  const std::string pad = "%p = pad %x {dim=1, low=1, high=1, interior=0}\n";
  CHECK(taps(32, pad) == "group 0 (elementwise): %1 %2 %3 %4 %5 %6 <- %0 -> %6\n");
  CHECK(taps(4, pad) ==
        "group 0 (copy): %1 <- %0 -> %1\n"
        "group 1 (elementwise): %2 %3 %4 %5 %6 <- %1 -> %6\n");
  // Padded after an exp: computed once, written, and read at each tap.
  CHECK(taps(32, "%e = exp %x\n%p = pad %e {dim=1, low=1, high=1, interior=0}\n") ==
        "group 0 (elementwise): %1 %2 <- %0 -> %2\n"
        "group 1 (elementwise): %3 %4 %5 %6 %7 <- %2 -> %7\n");
}

// A slice of a buffer read at several taps and broadcast over output channels
// (conv2d's tap sum for one input channel and 16 outputs, the padded image
// copied): each evaluation is one load at an affine index, so it is recomputed
// at each tap whatever its rows (here 10), not copied (nn_conv's tap_sum:
// digits conv1's forward 3 copies fewer, 0.52 -> 0.58 of its roofline).
TEST_CASE("fusion: a slice of a buffer read at several taps under a broadcast is recomputed") {
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[4,2,10]
    %w = arg {index=1} : f32[1,16,1]
    %r = slice %x {dim=1, start=0, end=1, step=1}
    %a = slice %r {dim=2, start=0, end=8, step=1}
    %b = slice %r {dim=2, start=1, end=9, step=1}
    %c = slice %r {dim=2, start=2, end=10, step=1}
    %ma = mul %a, %w
    %mb = mul %b, %w
    %mc = mul %c, %w
    %s = add %ma, %mb
    %t = add %s, %mc
    return %t
  )") == "group 0 (elementwise): %2 %3 %4 %5 %6 %7 %8 %9 %10 <- %0 %1 -> %10\n");
  // An exp of it is arithmetic: computed once, written, and read at each tap.
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[4,2,10]
    %w = arg {index=1} : f32[1,16,1]
    %e = exp %x
    %r = slice %e {dim=1, start=0, end=1, step=1}
    %a = slice %r {dim=2, start=0, end=8, step=1}
    %b = slice %r {dim=2, start=1, end=9, step=1}
    %ma = mul %a, %w
    %mb = mul %b, %w
    %s = add %ma, %mb
    return %s
  )") == "group 0 (elementwise): %2 %3 <- %0 -> %3\n"
         "group 1 (elementwise): %4 %5 %6 %7 %8 <- %3 %1 -> %8\n");
}

// A padded image read through overlapping windows (unfold): a long sum over
// the windows' positions (a depthwise conv's weight gradient, 2 images of
// 16x16 a row) reads the pad in place, a sum over each window's taps (a
// pooling: 9 elements a row) reads a padded copy.
TEST_CASE("fusion: a pad read through windows joins a long sum over their positions only") {
  auto windows = [](const std::string& sum) {
    return plan_text(("%x = arg {index=0} : f32[2,3,16,16]\n"
                      "%a = pad %x {dim=2, low=1, high=1, interior=0}\n"
                      "%b = pad %a {dim=3, low=1, high=1, interior=0}\n"
                      "%u = unfold %b {dim=2, size=3, step=1, dilation=1}\n"
                      "%v = unfold %u {dim=3, size=3, step=1, dilation=1}\n" +
                      sum + "return %s\n")
                         .c_str());
  };
  CHECK(windows("%s = sum %v {dims=[0,2,3], keepdim=0}\n") ==
        "group 0 (reduction): %1 %2 %3 %4 %5 <- %0 -> %5\n");
  CHECK(windows("%s = sum %v {dims=[4,5], keepdim=0}\n") ==
        "group 0 (copy): %1 %2 <- %0 -> %2\n"
        "group 1 (reduction): %3 %4 %5 <- %2 -> %5\n");
}

// Taps of a channels-last view (conv2d's tall patches, nn_conv.cpp): a permute
// that moves the last dim makes each row a strided gather, one scalar load an
// element, so it is copied once by a kernel of its own and the taps read its
// contiguous rows; a permute that keeps the last dim is recomputed at each tap.
TEST_CASE("fusion: a permute moving the last dim is copied once, not recomputed at each tap") {
  auto taps = [](const std::string& x, const std::string& perm) {
    auto tap = [&](int a) {
      return "{dim=1, start=" + std::to_string(a) + ", end=" + std::to_string(a + 32) +
             ", step=1}\n";
    };
    return plan_text(("%x = arg {index=0} : " + x + "\n%q = permute %x {perm=" + perm +
                      "}\n%p = pad %q {dim=1, low=1, high=1, interior=0}\n%a = slice %p " +
                      tap(0) + "%b = slice %p " + tap(1) + "%c = slice %p " + tap(2) +
                      "%s = add %a, %b\n%t = add %s, %c\nreturn %t\n")
                         .c_str());
  };
  // [32, 4] seen as [4, 32]: rows of 32 read at stride 4.
  CHECK(taps("f32[32,4]", "[1,0]") ==
        "group 0 (copy): %1 %2 <- %0 -> %2\n"
        "group 1 (elementwise): %3 %4 %5 %6 %7 <- %2 -> %7\n");
  // [32, 4, 32] seen as [4, 32, 32]: rows of 32 still contiguous.
  CHECK(taps("f32[32,4,32]", "[1,0,2]") ==
        "group 0 (elementwise): %1 %2 %3 %4 %5 %6 %7 <- %0 -> %7\n");
}

TEST_CASE("fusion: conv2d's bias and relu after the GEMM's reshape are its epilogue") {
  CHECK(plan_text(R"(
    %w = param {index=0} : f32[1,8,36]
    %cols = arg {index=0} : f32[2,1,36,64]
    %b = param {index=1} : f32[1,8,1]
    %h = matmul %w, %cols
    %hb = add %h, %b
    %y = reshape %hb {shape=[2,8,8,8]}
    %r = relu %y
    return %r
  )") == "group 0 (matmul): %3 %4 %5 %6 <- %0 %1 %2 -> %6\n");
}

TEST_CASE("fusion: a permute feeding a matmul is a copy group; constants it reads are buffers") {
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[4,16]
    %w = param {index=0} : f32[4,16]
    %wt = permute %w {perm=[1, 0]}
    %h = matmul %x, %wt
    %one = constant {value=1.0} : f32[4,4]
    %k = matmul %h, %one
    %r = add %k, %one
    return %r
  )") == "group 0 (copy): %2 <- %1 -> %2\n"
         "group 1 (matmul): %3 <- %0 %2 -> %3\n"
         "group 2 (elementwise): %4 <- -> %4\n"
         "group 3 (matmul): %5 %4 %6 <- %3 %4 -> %6\n");
}

// A draw is philox(key, offset + arange): elementwise, fused with its users.
TEST_CASE("fusion: literals and custom calls are opaque groups of their own; random draws fuse") {
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[4]
    %key = param {index=0} : i64[]
    %offset = param {index=1} : i64[]
    %i = arange {start=0, step=1} : i64[4]
    %n = add %i, %offset
    %r = philox %key, %n
    %l = literal {data=[1.0, 2.0, 3.0, 4.0]} : f32[4]
    %a = add %x, %r
    %b = mul %a, %l
    %c, %d = custom %b {fn=2} : f32[4], f32[4]
    %e = add %c, %d
    %f = arange {start=0, step=1} : f32[4]
    %g = add %e, %f
    return %g
  )") == "group 0 (opaque): %6 <- -> %6\n"
         "group 1 (elementwise): %3 %4 %5 %7 %8 <- %2 %1 %0 %6 -> %8\n"
         "group 2 (opaque): %9,%10 <- %8 -> %9 %10\n"
         "group 3 (elementwise): %11 %12 %13 <- %9 %10 -> %13\n");
}

TEST_CASE("fusion off: one group per op, constants inside the groups that read them") {
  const char* text = R"(
    %x = arg {index=0} : f32[32,128]
    %m = max %x {dims=[1], keepdim=1}
    %s = sub %x, %m
    %e = exp %s
    %c = constant {value=0.5} : f32[]
    %h = mul %e, %c
    %t = sum %h {dims=[1], keepdim=1}
    %y = div %h, %t
    return %y
  )";
  CHECK(plan_text(text, false) ==
        "group 0 (reduction): %1 <- %0 -> %1\n"
        "group 1 (elementwise): %2 <- %0 %1 -> %2\n"
        "group 2 (elementwise): %3 <- %2 -> %3\n"
        "group 3 (elementwise): %4 %5 <- %3 -> %5\n"
        "group 4 (reduction): %6 <- %5 -> %6\n"
        "group 5 (elementwise): %7 <- %5 %6 -> %7\n");
  CHECK(plan_text(text, true) == "group 0 (reduction): %1 %2 %3 %4 %5 %6 %7 <- %0 -> %7\n");
}

TEST_CASE("fusion: merging never closes a cycle through a third group") {
  // %a feeds the matmul, which feeds %d; fusing %a with %d would need the matmul
  // both before and after the merged group.
  Graph g = ir(R"(
    %x = arg {index=0} : f32[8,8]
    %a = exp %x
    %h = matmul %a, %a
    %d = add %a, %h
    %e = neg %d
    return %e
  )");
  std::vector<FusionGroup> groups = plan(g);
  CHECK(fusion_plan_str(g, groups) ==
        "group 0 (elementwise): %1 <- %0 -> %1\n"
        "group 1 (matmul): %2 %3 %4 <- %1 -> %4\n");
}

TEST_CASE("fusion: dead nodes are in no group; graph outputs and updates are outputs") {
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[4]
    %w = param {index=0} : f32[4]
    %dead = exp %x
    %a = mul %x, %w
    %b = neg %a
    %lr = constant {value=0.1} : f32[]
    %g = mul %b, %lr
    %step = sub %w, %g
    return %a
    update 0 = %step
  )") == "group 0 (elementwise): %3 %4 %5 %6 %7 <- %0 %1 -> %3 %7\n");
}

TEST_CASE("fusion on seeded random graphs: acyclic, complete, consistent") {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    CAPTURE(seed);
    Graph g = passtest::random_graph(seed, 20 + seed % 21);
    verify(g);
    CAPTURE(print_graph(g));
    std::vector<FusionGroup> fused = plan(g, true);
    std::vector<FusionGroup> unfused = plan(g, false);
    CHECK(fused.size() <= unfused.size());
  }
}

TEST_CASE("fusion: a returned constant, or one a custom call reads, is written by its own group") {
  CHECK(plan_text(R"(
    %x = arg {index=0} : f32[4]
    %c = constant {value=3.0} : f32[4]
    %y = mul %x, %c
    %z = custom %c {fn=1} : f32[4]
    %w = add %z, %c
    return %y, %c, %w
  )") == "group 0 (elementwise): %1 <- -> %1\n"
         "group 1 (elementwise): %1 %2 <- %0 -> %2\n"
         "group 2 (opaque): %3 <- %1 -> %3\n"
         "group 3 (elementwise): %1 %4 <- %3 -> %4\n");
}

TEST_CASE("first_loc: the first member with a source line names the group; none, an unknown one") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[8]
    %c = constant {value=2.0} : f32[]
    %1 = mul %x, %c
    %2 = exp %1  @ model.cpp:7
    %3 = add %2, %x  @ model.cpp:9
    return %3
  )");
  std::vector<FusionGroup> groups = plan(g);
  REQUIRE(groups.size() == 1);
  CHECK(first_loc(g, groups[0]).str() == "model.cpp:7");
  FusionGroup unknown = groups[0];
  unknown.nodes.resize(2);  // the constant and the mul: no line
  CHECK_FALSE(first_loc(g, unknown).known());
}
