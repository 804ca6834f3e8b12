// kiln-fuzz: the differential fuzzer of traced against eager (issue #8).
//   kiln-fuzz --programs 10000 --seed 7          random programs, eager vs traced
//   kiln-fuzz --seed 7 --program 123             one program again (its reproducer on failure)
//   kiln-fuzz --without detach,backward-inside   leave features out
//   kiln-fuzz --mutate-ir 500 --seed 3           damaged IR text into parse_graph
//   kiln-fuzz --mutate-saved 500 --seed 3        damaged saved graphs into kiln::load
//   kiln-fuzz --replay FILE                      one IR text or saved graph, as mutation mode does
//   kiln-fuzz --op-coverage 400 --seed 1         each op of the table drawn, or excluded and why
// Prints one summary line; exits 1 when anything failed, 2 on a usage error.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <map>

#include "ir/error.h"
#include "tools/fuzz/coverage.h"
#include "tools/fuzz/differential.h"
#include "tools/fuzz/mutate.h"
#include "tools/fuzz/reproducer.h"

namespace kiln::fuzz {
namespace {

struct Options {
  int64_t programs = 100;
  uint64_t seed = 1;
  int64_t program = -1;  // only this one
  std::string without, with, ignore, mode;
  bool verbose = false, no_shrink = false, print = false;
  int64_t max_shrunk = 10;  // kinds of failure shrunk and printed (the first of each)
  int64_t mutate_ir = 0, mutate_saved = 0, op_coverage = 0;
  double time_limit_s = 20;
  std::string replay;
};

std::string error_first_line(const std::string& message) {
  return message.substr(0, message.find('\n'));
}

uint64_t program_seed(uint64_t seed, int64_t i) {
  Rng r(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i));
  return r.next();
}

int run_programs(const Options& o) {
  const uint32_t features =
      (kDefaultFeatures | parse_features(o.with)) & ~parse_features(o.without);
  const CheckOptions checks = parse_ignored(o.ignore);
  int64_t passed = 0, failed = 0, both_threw = 0;
  std::map<std::string, int64_t> kinds;  // failures per kind
  const int64_t first = o.program >= 0 ? o.program : 0;
  const int64_t last = o.program >= 0 ? o.program + 1 : o.programs;
  for (int64_t i = first; i < last; ++i) {
    Program p = generate(program_seed(o.seed, i), features);
    if (o.mode == "outside") p.mode = Mode::backward_outside;
    if (o.mode == "inside") p.mode = Mode::backward_inside;
    if (o.mode == "nograd") p.mode = Mode::no_grad;
    if (p.mode != Mode::backward_inside) p.optimizer = Optimizer::none;
    const std::string title = "kiln-fuzz --seed " + std::to_string(o.seed) + " --program " +
                              std::to_string(i) +
                              (o.without.empty() ? "" : " --without " + o.without) +
                              (o.with.empty() ? "" : " --with " + o.with) +
                              (o.ignore.empty() ? "" : " --ignore " + o.ignore);
    if (o.print) std::cout << reproducer(p, title) << "\n";
    const Verdict v = check_program(p, checks);
    if (o.verbose)
      std::cout << "program " << i << ": " << p.instrs.size() << " instructions, "
                << (v.failure      ? std::string("FAILED")
                    : v.both_threw ? "kiln::Error both ways: " + error_first_line(v.error)
                                   : std::string("passed"))
                << std::endl;
    if (!v.failure) {
      ++passed;
      both_threw += v.both_threw;
      continue;
    }
    ++failed;
    std::cout << "FAILED: program " << i << " [" << v.failure->kind << "]: " << v.failure->detail
              << "\n";
    // The first failure of each kind is shrunk and printed; later ones are counted.
    if (kinds[v.failure->kind]++ > 0 || static_cast<int64_t>(kinds.size()) > o.max_shrunk) continue;
    const Program small = o.no_shrink ? p : shrink(p, *v.failure, checks);
    const Verdict again = check_program(small, checks);
    std::cout << "reproducer (" << small.instrs.size() << " of " << p.instrs.size()
              << " instructions; rerun with: " << title << "):\n"
              << (again.failure ? again.failure->detail + "\n" : "") << reproducer(small, title)
              << std::endl;
  }
  std::cout << "kiln-fuzz: " << (last - first) << " programs from seed " << o.seed << ": " << passed
            << " passed, " << failed << " failed";
  if (both_threw) std::cout << " (" << both_threw << " raised kiln::Error both ways)";
  std::cout << std::endl;
  for (const auto& [kind, n] : kinds) std::cout << "  " << n << " x [" << kind << "]\n";
  return failed ? 1 : 0;
}

int run_mutation(const Options& o, MutationTarget target, int64_t n) {
  MutationOptions m;
  m.target = target;
  m.inputs = n;
  m.seed = o.seed;
  m.time_limit_s = o.time_limit_s;
  m.verbose = o.verbose;
  m.skip_sparse_indices = parse_ignored(o.ignore).sparse_indices;
  const MutationSummary s =
      o.replay.empty() ? run_mutations(m, std::cout) : replay_input(o.replay, m, std::cout);
  std::cout << "kiln-fuzz: " << s.inputs << " mutated "
            << (target == MutationTarget::ir_text ? "IR texts" : "saved graphs") << " from seed "
            << o.seed << ": " << s.rejected << " rejected with kiln::Error, " << s.accepted
            << " accepted (" << s.ran << " run), " << s.failed << " failed" << std::endl;
  return s.failed ? 1 : 0;
}

int run_op_coverage(const Options& o) {
  const std::set<OpKind> drawn = ops_drawn(o.seed, o.op_coverage);
  const std::vector<std::string> problems = coverage_problems(drawn);
  for (const std::string& p : problems) std::cout << "op coverage: " << p << "\n";
  int64_t table = 0;
  for (OpKind k : all_ops()) table += !is_composite(k);
  std::cout << "kiln-fuzz: " << o.op_coverage << " programs from seed " << o.seed << " record "
            << drawn.size() << " of the table's " << table << " ops; " << ops_not_drawn().size()
            << " are not drawn on purpose; " << problems.size() << " problem(s)" << std::endl;
  return problems.empty() ? 0 : 1;
}

}  // namespace
}  // namespace kiln::fuzz

int main(int argc, char** argv) {
  using namespace kiln::fuzz;
  Options o;
  CLI::App app{"kiln-fuzz: random tensor programs, run eagerly and traced, compared"};
  app.add_option("--programs", o.programs, "number of programs")->check(CLI::NonNegativeNumber);
  app.add_option("--seed", o.seed, "seed of the run");
  app.add_option("--program", o.program, "run only program I of the seed (to reproduce one)");
  app.add_option("--without", o.without, "features to leave out: " + feature_names());
  app.add_option("--with", o.with, "features to add (all are on by default)");
  app.add_option("--ignore", o.ignore,
                 "differences to let pass: undefined-grad (undefined == all zeros), "
                 "requires-grad (outputs' flags), sparse-indices (mutation mode: do not run "
                 "IR whose arg/param indices are not 0..n-1)");
  app.add_option("--mode", o.mode, "force one mode: outside, inside or nograd")
      ->check(CLI::IsMember({"outside", "inside", "nograd"}));
  app.add_flag("--verbose", o.verbose,
               "a line per program (mutation mode: per input) and the time taken");
  app.add_flag("--print", o.print, "print every program as C++ before running it");
  app.add_flag("--no-shrink", o.no_shrink, "print failing programs as generated");
  app.add_option("--max-shrunk", o.max_shrunk,
                 "kinds of failure to shrink and print, the first program of each (default 10)");
  app.add_option("--mutate-ir", o.mutate_ir, "mutation mode: N damaged IR texts");
  app.add_option("--mutate-saved", o.mutate_saved, "mutation mode: N damaged saved graphs");
  app.add_option("--replay", o.replay,
                 "mutation mode: feed this one file (IR text or saved graph)");
  app.add_option("--op-coverage", o.op_coverage,
                 "check that N programs record every op of the table not excluded on purpose");
  app.add_option("--time-limit", o.time_limit_s, "mutation mode: seconds per input");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto start = std::chrono::steady_clock::now();
    int rc = 0;
    if (o.mutate_ir > 0) rc |= run_mutation(o, MutationTarget::ir_text, o.mutate_ir);
    if (o.mutate_saved > 0) rc |= run_mutation(o, MutationTarget::saved_graph, o.mutate_saved);
    if (!o.replay.empty()) rc = run_mutation(o, MutationTarget::ir_text, 1);
    if (o.op_coverage > 0) rc |= run_op_coverage(o);
    if (o.mutate_ir == 0 && o.mutate_saved == 0 && o.replay.empty() && o.op_coverage == 0)
      rc = run_programs(o);
    if (o.verbose)
      std::cout << "kiln-fuzz: "
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                << " s\n";
    return rc;
  } catch (const kiln::Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
