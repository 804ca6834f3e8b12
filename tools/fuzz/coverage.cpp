// The fuzzer's coverage of the op table (see coverage.h).
#include "tools/fuzz/coverage.h"

#include <array>
#include <map>

#include "frontend/tensor.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "tools/fuzz/body.h"

namespace kiln::fuzz {

namespace {

// The step functions: an ulp of difference before one (eager against fused
// code) flips a whole step, which the fuzzer would report. The generic math
// instructions leave them all out; floor is recorded by histc alone, whose
// operands the generator keeps exact (unwritten inputs: generate_composite.cpp).
constexpr OpKind kStepFunctions[] = {OpKind::floor, OpKind::ceil, OpKind::round,
                                     OpKind::trunc, OpKind::fmod, OpKind::remainder};
constexpr OpKind kDrawnStepFunction = OpKind::floor;

}  // namespace

const std::vector<std::pair<OpKind, std::string>>& ops_not_drawn() {
  static const std::string step =
      "a step function: an ulp of difference before it (eager against fused code) flips a whole "
      "step, which the fuzzer would report; the op tests of every backend and the conformance "
      "matrix cover it";
  static const std::string collective =
      "a collective needs a job of several ranks: tests/distributed runs them eager and traced";
  static const std::vector<std::pair<OpKind, std::string>> ops = [&] {
    std::vector<std::pair<OpKind, std::string>> r;
    for (OpKind k : kStepFunctions)
      if (k != kDrawnStepFunction) r.emplace_back(k, step);
    r.insert(
        r.end(),
        {
            {OpKind::philox,
             "a random draw: the fuzzer's programs are functions of their inputs; random ops are "
             "compared eager against traced in tests/frontend/random_test.cpp and the conformance "
             "matrix"},
            {OpKind::check_nonzero,
             "recorded only for an integer divisor of fmod/remainder, and the fuzzer's values are "
             "floats"},
            {OpKind::check_distribution,
             "recorded only by multinomial, a random draw (as philox); tests/frontend/"
             "multinomial_test.cpp runs it eager and traced"},
            {OpKind::all_reduce, collective},
            {OpKind::all_gather, collective},
            {OpKind::reduce_scatter, collective},
            {OpKind::broadcast, collective},
            {OpKind::custom,
             "a user's autograd::Function; the conformance case 'a custom autograd function' runs "
             "it"},
        });
    return r;
  }();
  return ops;
}

const std::vector<OpKind>& math_ops_drawn(int arity) {
  static const auto drawn = [] {
    std::map<OpKind, std::string> exempt(ops_not_drawn().begin(), ops_not_drawn().end());
    std::vector<OpKind> by_arity[2];
    for (OpKind k : all_ops())
      if (is_math(k) && !exempt.count(k) && k != kDrawnStepFunction &&
          (op_info(k).arity == 1 || op_info(k).arity == 2))
        by_arity[op_info(k).arity - 1].push_back(k);
    return std::array<std::vector<OpKind>, 2>{by_arity[0], by_arity[1]};
  }();
  return drawn.at(static_cast<size_t>(arity - 1));
}

std::set<OpKind> ops_drawn(uint64_t seed, int64_t programs) {
  std::set<OpKind> drawn;
  Rng seeds(seed);
  for (int64_t i = 0; i < programs; ++i) {
    Program p = generate(seeds.next(), kDefaultFeatures);
    p.mode = Mode::backward_inside;  // the gradient's ops too
    std::vector<Tensor> caps, args;
    for (const Input& in : p.inputs) (in.captured ? caps : args).push_back(make_input(in, p.dtype));
    const Body body = [&](const std::vector<Tensor>& a) { return run_body(p, caps, a, nullptr); };
    try {
      const Graph g = traced_body(body, args.size()).recorded(args);
      for (NodeId id = 0; id < NodeId(g.size()); ++id) drawn.insert(g[id].op);
    } catch (const Error&) {
      // A program that raises (as eagerly) records nothing to count.
    }
  }
  return drawn;
}

std::vector<std::string> coverage_problems(const std::set<OpKind>& drawn) {
  std::map<OpKind, std::string> exempt(ops_not_drawn().begin(), ops_not_drawn().end());
  std::vector<std::string> problems;
  for (OpKind k : all_ops()) {
    if (is_composite(k)) continue;
    const auto why = exempt.find(k);
    if (!drawn.count(k) && why == exempt.end())
      problems.push_back(std::string(op_name(k)) +
                         ": no fuzzer instruction records it (tools/fuzz/ops.def); add one, or "
                         "name it in ops_not_drawn() (tools/fuzz/coverage.cpp) with the reason");
    if (drawn.count(k) && why != exempt.end())
      problems.push_back(std::string(op_name(k)) + ": drawn, but listed as not drawn (" +
                         why->second + ")");
  }
  return problems;
}

}  // namespace kiln::fuzz
