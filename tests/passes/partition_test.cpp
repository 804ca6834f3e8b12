// partition: the forward/backward split of a traced call, from IR text: which
// values the forward saves, what the backward computes (run against autodiff's
// gradients in the interpreter), which tensors it differentiates, and the
// pipeline record the dump writes.
#include <doctest/doctest.h>

#include "pass_test_util.h"
#include "passes/partition.h"
#include "passes/pipeline.h"

using namespace kiln;
using passtest::ir;

namespace {

// A request to split `g` at its outputs (each a root, numbered as the call's outputs).
PartitionRequest split_all(const Graph& g, std::vector<char> arg_requires,
                           std::vector<char> param_requires) {
  PartitionRequest req;
  req.split = true;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    req.roots.push_back(g.outputs[i]);
    req.root_outputs.push_back(i);
  }
  req.arg_requires = std::move(arg_requires);
  req.param_requires = std::move(param_requires);
  req.n_args = static_cast<int64_t>(req.arg_requires.size());
  return req;
}

// Runs the forward, then the backward on its saved values and seeds of ones,
// and checks the gradients against autodiff of the unsplit graph.
void check_gradients(const Graph& g, const Partition& p, const std::vector<Value>& wrt) {
  passtest::Inputs in = passtest::random_inputs(g, 7);
  std::vector<HostArray> fwd = interpret(p.forward, in.args, in.params);
  REQUIRE(fwd.size() == p.saved_begin + p.saved);
  std::vector<HostArray> bargs = in.args;
  for (size_t k = 0; k < p.saved; ++k) bargs.push_back(fwd[p.saved_begin + k]);
  Graph full = autodiff(g, wrt);
  passtest::Inputs fin = in;
  for (Value o : g.outputs) {
    HostArray one = HostArray::make(TensorType{g.type(o).dtype, g.type(o).shape, {}});
    visit_dtype(one.type.dtype, [&](auto zero) {
      using T = decltype(zero);
      for (int64_t i = 0; i < one.type.numel(); ++i) one.data<T>()[i] = T(1);
    });
    bargs.push_back(one);
    fin.args.push_back(one);
  }
  std::vector<HostArray> grads = interpret(p.backward, bargs, in.params);
  std::vector<HostArray> want = interpret(full, fin.args, fin.params);
  REQUIRE(grads.size() == wrt.size());
  for (size_t j = 0; j < grads.size(); ++j) {
    CAPTURE(j);
    const std::vector<double> got = passtest::values_of(grads[j]);
    const std::vector<double> expect = passtest::values_of(want[g.outputs.size() + j]);
    REQUIRE(got.size() == expect.size());
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == doctest::Approx(expect[i]).epsilon(1e-6));
  }
}

const char* kProduct = R"(
    %x = arg {index=0} : f32[3]
    %w = param {index=0} : f32[3]
    %m = mul %x, %w
    %e = exp %m
    %s = sum %e {dims=[0], keepdim=0}
    return %s
  )";

}  // namespace

TEST_CASE(
    "partition: the forward saves what the backward reads, the backward gives the gradients") {
  Graph g = ir(kProduct);
  const Graph traced = g;
  Builder b(g);
  const Partition p = partition(b, split_all(traced, {1}, {1}));
  CHECK(p.split);
  CHECK_FALSE(p.backward_freed);
  CHECK(p.wrt_args == std::vector<int64_t>{0});
  CHECK(p.wrt_params == std::vector<int64_t>{0});
  CHECK(p.wrt_reached_by == std::vector<std::vector<size_t>>{{0}, {0}});
  CHECK(p.gradient_types.size() == 2);
  // exp's gradient reads its result; mul's reads x and w, which the backward has itself.
  CHECK(p.saved_begin == 1);
  CHECK(p.saved == 1);
  CHECK(print_graph(p.forward) ==
        "%0 = arg {index=0} : f32[3]\n"
        "%1 = param {index=0} : f32[3]\n"
        "%2 = mul %0, %1 : f32[3]\n"
        "%3 = exp %2 : f32[3]\n"
        "%4 = sum %3 {dims=[0], keepdim=0} : f32[]\n"
        "return %4, %3\n");
  verify(p.forward);
  verify(p.backward);
  check_gradients(traced, p, {Value(0), Value(1)});
}

TEST_CASE("partition: only tensors a gradient reaches and that require grad are differentiated") {
  // y reaches the output only through a comparison; v requires no grad.
  const char* text = R"(
    %x = arg {index=0} : f32[3]
    %y = arg {index=1} : f32[3]
    %v = param {index=0} : f32[3]
    %w = param {index=1} : f32[3]
    %c = lt %x, %y
    %f = cast %c {dtype=f32}
    %a = mul %x, %f
    %b = mul %a, %v
    %t = tanh %w
    return %b, %t
  )";
  Graph g = ir(text);
  const Graph traced = g;
  Builder b(g);
  const Partition p = partition(b, split_all(traced, {1, 1}, {0, 1}));
  CHECK(p.wrt_args == std::vector<int64_t>{0});
  CHECK(p.wrt_params == std::vector<int64_t>{1});
  // x's gradient comes from output 0 alone, w's from output 1 alone.
  CHECK(p.wrt_reached_by == std::vector<std::vector<size_t>>{{0}, {1}});
  check_gradients(traced, p, {Value(0), Value(3)});
}

TEST_CASE("partition: the layout numbers each root by the call output it is") {
  // Output 0 requires no grad: the only root is output 1.
  Graph g = ir(R"(
    %x = arg {index=0} : f32[3]
    %w = param {index=0} : f32[3]
    %n = neg %x
    %t = tanh %w
    return %n, %t
  )");
  const Graph traced = g;
  Builder b(g);
  PartitionRequest req = split_all(traced, {0}, {1});
  req.roots = {traced.outputs[1]};
  req.root_outputs = {1};
  const Partition p = partition(b, req);
  CHECK(p.root_outputs == std::vector<size_t>{1});
  CHECK(p.root_types == std::vector<TensorType>{traced.type(traced.outputs[1])});
  CHECK(p.wrt_params == std::vector<int64_t>{0});
  CHECK(p.wrt_reached_by == std::vector<std::vector<size_t>>{{0}});
}

TEST_CASE("partition: without a split the graph stays one plan") {
  Graph g = ir(kProduct);
  const std::string text = print_graph(g);
  Builder b(g);
  const Partition p = partition(b, PartitionRequest{});
  CHECK_FALSE(p.split);
  CHECK(print_graph(p.forward) == text);
  CHECK(p.backward.size() == 0);
  CHECK(partition_str(p) == text);
}

TEST_CASE("partition: roots whose gradients read freed values build no backward") {
  Graph g = ir(kProduct);
  const Graph traced = g;
  Builder b(g);
  PartitionRequest req = split_all(traced, {1}, {0});
  req.freed.assign(traced.size(), 0);
  req.freed[3] = 1;  // a backward() inside the body went through the exp
  const Partition p = partition(b, req);
  CHECK(p.backward_freed);
  REQUIRE(p.freed_roots.size() == 1);
  CHECK(p.freed_roots[0].node == 3);
  CHECK(p.freed_roots[0].op == OpKind::exp);  // what the error a backward raises names
  CHECK(p.freed_roots[0].loc == traced[3].loc);
  // What a later free would break first: the mul, which reads w for x's gradient.
  REQUIRE(p.reading_roots.size() == 1);
  CHECK(p.reading_roots[0].node == 2);
  CHECK(p.reading_roots[0].op == OpKind::mul);
  CHECK(p.saved == 0);
  CHECK(p.saved_begin == 1);
  CHECK(print_graph(p.forward) == print_graph(traced));
  CHECK(p.backward.size() == 0);
  CHECK(p.gradient_types.size() == 1);
  CHECK(partition_str(p).find("// no backward") != std::string::npos);
}

TEST_CASE("partition: per root, the saved values a write replaced and those the caller holds") {
  // Two roots: the sum through exp(x * w), and the product itself.
  Graph g = ir(R"(
    %x = arg {index=0} : f32[3]
    %w = param {index=0} : f32[3]
    %m = mul %x, %w
    %e = exp %m
    %s = sum %e {dims=[0], keepdim=0}
    return %s, %m
  )");
  const Graph traced = g;
  Builder b(g);
  // The tracer's storages: x, w, the product (written in place since) and exp's result.
  auto x = std::make_shared<int>(0), w = std::make_shared<int>(1), m = std::make_shared<int>(2),
       e = std::make_shared<int>(3);
  SavedValues saved;
  saved.record(2, {x, w}, m, {true, true});
  saved.record(3, {m}, e, {true});
  saved.wrote(w.get());
  PartitionRequest req = split_all(traced, {1}, {1});
  req.saved = &saved;
  req.held = {x.get(), e.get()};  // what the caller holds after the call: x and exp's result
  const Partition p = partition(b, req);
  // Both roots' backwards read mul's w, which the write replaced.
  REQUIRE(p.stale_roots.size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    CHECK(p.stale_roots[k].root == k);
    CHECK(p.stale_roots[k].node == 2);
    CHECK(p.stale_roots[k].op == OpKind::mul);
    CHECK(p.stale_roots[k].loc == traced[2].loc);
    CHECK(p.stale_roots[k].expected == 0);
    CHECK(p.stale_roots[k].found == 1);
  }
  // Root 0 reads mul's x (held 0) and exp's result (held 1); root 1 reads only mul's x.
  REQUIRE(p.held_reads.size() == 3);
  CHECK(p.held_reads[0].root == 0);
  CHECK(p.held_reads[0].node == 2);
  CHECK(p.held_reads[0].held == 0);
  CHECK(p.held_reads[1].root == 0);
  CHECK(p.held_reads[1].node == 3);
  CHECK(p.held_reads[1].op == OpKind::exp);
  CHECK(p.held_reads[1].held == 1);
  CHECK(p.held_reads[2].root == 1);
  CHECK(p.held_reads[2].node == 2);
  CHECK(p.held_reads[2].held == 0);
  // The seeds' types, one per root.
  CHECK(p.root_types == std::vector<TensorType>{traced.type(Value(4)), traced.type(Value(2))});
  // Without the tracer's record, neither is looked for.
  Graph h = ir(kProduct);
  Builder hb(h);
  const Partition q = partition(hb, split_all(h, {1}, {1}));
  CHECK(q.stale_roots.empty());
  CHECK(q.held_reads.empty());
}

TEST_CASE("run_partition logs the pipeline's first stage, whose text parses as the forward") {
  Graph g = ir(kProduct);
  const Graph traced = g;
  Builder b(g);
  std::vector<PassRecord> log;
  const Partition p = run_partition(b, split_all(traced, {1}, {1}), &log, true);
  REQUIRE(log.size() == 1);
  CHECK(log[0].name == pipeline_pass_names()[0]);
  CHECK(log[0].name == "partition");
  CHECK(log[0].graph);
  CHECK(log[0].changed);
  CHECK(log[0].ms >= 0);
  CHECK(log[0].graph_text.find("// the forward returns 1 outputs, then 1 values saved") !=
        std::string::npos);
  CHECK(log[0].graph_text.find("outputs: the gradients of arg 0 param 0\n") != std::string::npos);
  CHECK(print_graph(ir(log[0].graph_text)) == print_graph(p.forward));
  // Unsplit and unchanged: logged as such; without `record`, no text.
  Graph h = ir(kProduct);
  Builder hb(h);
  log.clear();
  run_partition(hb, PartitionRequest{}, &log);
  REQUIRE(log.size() == 1);
  CHECK_FALSE(log[0].changed);
  CHECK(log[0].graph_text.empty());
}
