// run_pipeline and optimize_graph: the named list, its log, and verification after each pass.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/pipeline.h"

using namespace kiln;
using passtest::ir;

TEST_CASE(
    "the pipeline is one named list: the partition, the graph passes, then the schedule's steps") {
  CHECK(pipeline_pass_names() ==
        std::vector<std::string>{"partition", "simplify", "fold_constants", "cse", "dce",
                                 "split_scans", "split_column_sums", "bucket_collectives", "fusion",
                                 "fold_transposes", "collectives", "memory", "lower", "in_place",
                                 "accumulate"});
  Graph g = ir(R"(
    %x = arg {index=0} : f32[4]
    %y = exp %x
    return %y
  )");
  std::vector<PassRecord> log;
  Pipelined p = run_pipeline(g, PipelineOptions{true, true, {}}, &log);
  // run_pipeline runs every stage after the partition (run_partition ran it as
  // traced) up to `lower`; finish_pipeline records that one (the code generator
  // lowers the groups: here none was) and runs the rest.
  CHECK(log.back().name == "memory");
  finish_pipeline(p, PipelineOptions{true, true, {}}, 0.0, &log);
  REQUIRE(log.size() == pipeline_pass_names().size() - 1);
  for (size_t i = 0; i < log.size(); ++i) {
    CAPTURE(i);
    CHECK(log[i].name == pipeline_pass_names()[i + 1]);
    CHECK(log[i].graph == (i < 7));
    CHECK_FALSE(log[i].graph_text.empty());
  }
  CHECK(print_graph(p.graph) == print_graph(g));
  REQUIRE(p.schedule.groups.size() == 1);
  CHECK(p.schedule.groups[0].kind == GroupKind::Elementwise);
  CHECK(log.back().graph_text == "no accumulating matmuls\n");
}

TEST_CASE("the pipeline simplifies, folds, merges and cleans up, logging each pass") {
  const char* text = R"(
    %x = arg {index=0} : f32[4]
    %one = constant {value=1.0} : f32[]
    %two = constant {value=2.0} : f32[]
    %three = add %one, %two
    %a = mul %x, %one
    %b = mul %a, %three
    %c = mul %x, %three
    %d = add %b, %c
    %dead = exp %d
    %e = neg %d
    %f = neg %e
    return %f
  )";
  Graph g = ir(text);
  std::vector<PassRecord> log;
  Graph out = optimize_graph(g, PipelineOptions{true, true, {}}, &log);
  std::string want =
      "%0 = arg {index=0} : f32[4]\n"
      "%1 = constant {value=3.0} : f32[]\n"
      "%2 = mul %0, %1 : f32[4]\n"
      "%3 = add %2, %2 : f32[4]\n"
      "return %3\n";
  CHECK(print_graph(out) == want);
  passtest::check_same_results(g, out);
  REQUIRE(log.size() == 7);
  for (size_t i = 0; i < log.size(); ++i) {
    CHECK(log[i].name == pipeline_pass_names()[i + 1]);
    CHECK(log[i].ms >= 0);
    CHECK(log[i].changed == (i < 4));  // no long scans or column sums, no collectives
    verify(ir(log[i].graph_text));
  }
  CHECK(log[3].graph_text == want);

  // Running it again changes nothing; without `record` no text is kept.
  std::vector<PassRecord> again, unrecorded;
  CHECK(print_graph(optimize_graph(out, PipelineOptions{true, true, {}}, &again)) == want);
  REQUIRE(again.size() == 7);
  for (const PassRecord& r : again) CHECK_FALSE(r.changed);
  optimize_graph(g, PipelineOptions{false, true, {}}, &unrecorded);
  REQUIRE(unrecorded.size() == 7);
  for (const PassRecord& r : unrecorded) {
    CHECK(r.ms >= 0);
    CHECK(r.graph_text.empty());
  }
}

TEST_CASE("the pipeline verifies its input and names the failing step") {
  Graph g = ir(R"(
    %x = arg {index=0} : f32[4]
    %y = exp %x
    return %y
  )");
  g.node(1).results[0].shape = {5};
  // The suites run with KILN_VERIFY=1 (tests/main.cpp): as in a debug build.
  CHECK(verify_passes_by_default());
  std::string msg;
  try {
    optimize_graph(g);
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("invalid graph given to the pipeline") != std::string::npos);
  CHECK(msg.find("expected result type f32[4]") != std::string::npos);
  // With verification off the broken graph goes through unchecked.
  CHECK_NOTHROW(optimize_graph(g, PipelineOptions{false, false, {}}));
}

TEST_CASE("the pipeline keeps what seeded random graphs compute") {
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    CAPTURE(seed);
    Graph g = passtest::random_graph(seed, 20 + seed % 21, /*custom=*/false);
    CAPTURE(print_graph(g));
    Graph out = optimize_graph(g);
    passtest::check_same_results(g, out, seed);
    CHECK(out.size() <= g.size());
  }
}
