// The pass pipeline, as one straight list. Each pass is timed, compared with
// its input (by printed text) and, when asked, verified and recorded.
#include "passes/pipeline.h"

#include <chrono>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/collectives.h"
#include "passes/constant_fold.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/simplify.h"

namespace kiln {

namespace {

struct NamedPass {
  const char* name;
  Graph (*run)(const Graph&);
};

constexpr NamedPass kPasses[] = {
    {"simplify", simplify},
    {"fold_constants", fold_constants},
    {"cse", cse},
    {"dce", dce},
    {"bucket_collectives", bucket_collectives},
};

void verify_after(const Graph& g, const char* when) {
  try {
    verify(g);
  } catch (const Error& e) {
    throw Error(std::string("invalid graph ") + when + ": " + e.what());
  }
}

}  // namespace

Graph run_pipeline(const Graph& g, const PipelineOptions& opts, std::vector<PassRecord>* log) {
  if (opts.verify) verify_after(g, "given to the pipeline");
  Graph current = g;
  std::string text = log ? print_graph(current) : std::string();
  for (const NamedPass& pass : kPasses) {
    auto start = std::chrono::steady_clock::now();
    Graph next = pass.run(current);
    auto stop = std::chrono::steady_clock::now();
    if (opts.verify) verify_after(next, (std::string("after pass ") + pass.name).c_str());
    if (log) {
      std::string next_text = print_graph(next);
      PassRecord r;
      r.name = pass.name;
      r.changed = next_text != text;
      r.ms = std::chrono::duration<double, std::milli>(stop - start).count();
      if (opts.record) r.graph_text = next_text;
      log->push_back(std::move(r));
      text = std::move(next_text);
    }
    current = std::move(next);
  }
  return current;
}

const std::vector<std::string>& pipeline_pass_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const NamedPass& p : kPasses) v.push_back(p.name);
    return v;
  }();
  return names;
}

}  // namespace kiln
