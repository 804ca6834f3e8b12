// Seeing what was generated: the dumps' graph pictures (traced.dot,
// optimized.dot, fused.dot and their .svg), and profiles as Chrome trace-event
// files (Traced::profile, KILN_LOG=profile).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <kiln/kiln.h>

#include "frontend/dump.h"
#include "runtime/profile.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool has(const std::string& s, const std::string& piece) {
  return s.find(piece) != std::string::npos;
}

bool have_dot() {
  return std::system("command -v dot > /dev/null 2>&1") == 0;
}

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// The kernel names summary.txt lists, in order ("03 k5_reduction_sum (reduction)").
std::vector<std::string> summary_kernels(const std::string& summary) {
  std::vector<std::string> names;
  std::regex line(R"(^\d\d+ (\S+) \()");
  std::istringstream is(summary);
  for (std::string l; std::getline(is, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) names.push_back(m[1]);
  }
  return names;
}

// The first label line of each cluster of a picture, in order.
std::vector<std::string> cluster_names(const std::string& dot) {
  std::vector<std::string> names;
  std::regex cluster(R"re(subgraph cluster_k\d+ \{\n    label="([^"\\]+))re");
  for (auto it = std::sregex_iterator(dot.begin(), dot.end(), cluster);
       it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

const int kMatmulLine = __LINE__ + 2;  // the lines of `model`'s body, for the source checks
Tensor model(const Tensor& x, const Tensor& w) {
  Tensor h = (x.matmul(w) + 1).relu();
  return h.softmax(1).sum();
}

}  // namespace

TEST_CASE("a dump draws the traced graph, the optimized graph and the kernels") {
  manual_seed(1);
  Tensor w = randn({16, 8});
  auto f = jit([&](Tensor x) { return model(x, w); }, "pictured");
  const fs::path dir = fresh_dir("kiln_pictures");
  f.dump(dir.string(), randn({4, 16}));
  const fs::path sig = dir / "pictured" / "f32-4x16";
  REQUIRE(fs::exists(sig / "summary.txt"));
  const std::string summary = read_text(sig / "summary.txt");
  const std::string src = "pictures_test.cpp:" + std::to_string(kMatmulLine);
  for (const char* name : {"traced", "optimized", "fused"}) {
    CAPTURE(name);
    const fs::path dot = sig / (std::string(name) + ".dot");
    REQUIRE(fs::exists(dot));
    const std::string text = read_text(dot);
    CHECK(has(text, "digraph kiln {"));
    CHECK(has(text, src));  // the user's line that recorded the matmul
    CHECK(has(text, "f32[4,8]"));
    if (have_dot()) {
      CHECK(std::system(("dot -Tsvg '" + dot.string() + "' -o /dev/null").c_str()) == 0);
      REQUIRE(fs::exists(sig / (std::string(name) + ".svg")));
      CHECK(has(read_text(sig / (std::string(name) + ".svg")), "<svg"));
      CHECK(has(summary, std::string(name) + ".svg"));
    } else {
      MESSAGE("Graphviz's dot is not installed: no .svg to check (apt-get install graphviz)");
      CHECK(has(summary, "no svg: Graphviz's dot is not installed"));
    }
  }
  // One cluster per kernel of summary.txt, in its order, labelled with bytes and flops.
  const std::string fused = read_text(sig / "fused.dot");
  const std::vector<std::string> kernels = summary_kernels(summary);
  CHECK(kernels.size() >= 2);  // a matmul and the reduction after it
  CHECK(cluster_names(fused) == kernels);
  CHECK(has(fused, "reads "));
  CHECK(has(fused, " flops\""));
  CHECK(!has(read_text(sig / "traced.dot"), "subgraph"));
  CHECK(has(summary, "pictures: "));
  fs::remove_all(dir);
}

TEST_CASE("an embedding, a positional add and a layer norm are one kernel") {
  // The gather is a producer of the layer norm's reduction group: each row is
  // read from the table once, never written out in between.
  manual_seed(2);
  Tensor table = randn({1000, 64}), pos = randn({32, 64}), g = ones({64}), b = zeros({64});
  auto f = jit(
      [&](Tensor i) {
        return nn::functional::layer_norm(nn::functional::embedding(i, table) + pos, {64}, g, b,
                                          1e-5);
      },
      "embed_norm");
  const fs::path dir = fresh_dir("kiln_embed_norm");
  f.dump(dir.string(), randint(0, 1000, {8, 32}));
  const std::string summary = read_text(dir / "embed_norm" / "i64-8x32" / "summary.txt");
  CAPTURE(summary);
  const std::regex one(
      R"(\(reduction\)\n\s+nodes: [^\n]*=gather [^\n]*=add [^\n]*=sum [^\n]*=rsqrt)");
  CHECK(std::regex_search(summary, one));
  CHECK_FALSE(has(summary, "(elementwise)"));  // no kernel of its own for the gather
}

TEST_CASE("a cross-entropy step marks no maximum: softmax's shift takes no gradient") {
  // log_softmax subtracts each row's max (detached): the backward is
  // g - softmax * sum(g), with no mask of where the max was and no gradient
  // summed for it (two full-size passes and a full-size buffer fewer).
  Tensor w = (randn({16, 300}) * 0.1).requires_grad_();
  auto f = jit(
      [&](Tensor x, Tensor y) {
        Tensor loss = nn::functional::cross_entropy(x.matmul(w), y);
        loss.backward();
        return loss;
      },
      "ce_step");
  const fs::path dir = fresh_dir("kiln_ce_step");
  f.dump(dir.string(), randn({64, 16}), randint(0, 300, {64}));
  const std::string summary = read_text(dir / "ce_step" / "f32-64x16_i64-64" / "summary.txt");
  CAPTURE(summary);
  CHECK(has(summary, "=max"));
  CHECK_FALSE(has(summary, "=eq"));
}

TEST_CASE("a dump does not wait on a dot that takes too long") {
  // dot's layout of a model-sized graph ran for more than 18 minutes and the
  // program dumping it waited.
  const fs::path dir = fs::temp_directory_path() / ("kiln-slow-dot-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string fake = (dir / "dot").string();
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\nsleep 30\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  {
    std::ofstream g(dir / "g.dot");
    g << "digraph { a -> b }\n";
  }
  std::string why;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(render_svg((dir / "g.dot").string(), &why, 1, fake).empty());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(why.find("took more than 1 s") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a large kernel is drawn as one node, and the picture says so") {
  auto f = jit(
      [](Tensor x) {
        for (int i = 0; i < 40; ++i) x = (x * 1.01f + 0.5f).abs();
        return x;
      },
      "long_chain");
  const fs::path dir = fresh_dir("kiln_pictures_big");
  f.dump(dir.string(), ones({64}));
  const fs::path sig = dir / "long_chain" / "f32-64";
  const std::string fused = read_text(sig / "fused.dot");
  CHECK(has(fused, "nodes, collapsed:"));
  CHECK(has(fused, "1 kernel of more than 24 nodes drawn as one node"));
  CHECK(has(fused, "pictures_test.cpp:"));
  CHECK(cluster_names(fused) == summary_kernels(read_text(sig / "summary.txt")));
  // The optimized graph is drawn whole.
  CHECK(has(read_text(sig / "optimized.dot"), "= abs"));
  if (have_dot())
    CHECK(std::system(("dot -Tsvg '" + (sig / "fused.dot").string() + "' -o /dev/null").c_str()) ==
          0);
  fs::remove_all(dir);
}

namespace {

// The trace's events of one category.
std::vector<json> events_of(const json& trace, const std::string& cat) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents"))
    if (e.value("cat", "") == cat) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("profile writes a trace-event file: one event per plan step, with costs and threads") {
  manual_seed(2);
  Tensor w = randn({64, 32});
  auto f = jit([&](Tensor x) { return model(x, w); }, "profiled");
  Tensor x = randn({256, 64});
  const fs::path dir = fresh_dir("kiln_profile");
  fs::create_directories(dir);
  const std::string path = (dir / "first.json").string();
  Tensor y = f.profile(path, x);
  CHECK(y.item<float>() == doctest::Approx(model(x, w).item<float>()).epsilon(1e-4));
  const int64_t steps = f.stats().kernels;  // one signature: its plan's steps
  REQUIRE(steps >= 2);
  json trace = json::parse(read_text(path));  // throws on invalid JSON
  const std::vector<json> step_events = events_of(trace, "step");
  CHECK(static_cast<int64_t>(step_events.size()) == steps);
  std::set<int64_t> indices;
  bool blas = false;
  for (const json& e : step_events) {
    CHECK(e.at("ph") == "X");
    CHECK(e.at("dur").get<double>() >= 0);
    CHECK(e.contains("tid"));
    const json& a = e.at("args");
    indices.insert(a.at("step").get<int64_t>());
    CHECK(a.at("bytes_read").get<int64_t>() > 0);
    CHECK(a.contains("flops"));
    CHECK(has(a.at("source").get<std::string>(), "pictures_test.cpp:"));
    blas = blas || a.at("what") == "blas";
  }
  CHECK(static_cast<int64_t>(indices.size()) == steps);  // each step once
  CHECK(blas);                                           // the matmul ran as a BLAS call
  CHECK(events_of(trace, "compile").size() == 1);        // a new signature: traced and compiled
  CHECK(events_of(trace, "call").size() == 1);
  // Every thread that ran something has a name.
  std::set<int64_t> tids, named;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") tids.insert(e.at("tid").get<int64_t>());
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      named.insert(e.at("tid").get<int64_t>());
  }
  CHECK(tids == named);

  // A cached call: no compile, the same steps; profiling is off again afterwards.
  const std::string second = (dir / "second.json").string();
  f.profile(second, x);
  json again = json::parse(read_text(second));
  CHECK(static_cast<int64_t>(events_of(again, "step").size()) == steps);
  CHECK(events_of(again, "compile").empty());
  CHECK(!plan_profiling());

  // A sort is a library step of its own: an event of its own, named as such.
  auto sorted = jit([](Tensor v) { return (v * 2).argsort(1); }, "sorted");
  const std::string sort_path = (dir / "sort.json").string();
  (void)sorted.profile(sort_path, randn({4, 100}));
  json st = json::parse(read_text(sort_path));
  const std::vector<json> sort_steps = events_of(st, "step");
  CHECK(static_cast<int64_t>(sort_steps.size()) == sorted.stats().kernels);
  CHECK(std::any_of(sort_steps.begin(), sort_steps.end(),
                    [](const json& e) { return e.at("args").at("what") == "sort"; }));
  fs::remove_all(dir);
}

// Run as a child process by the next test (skipped in normal runs).
TEST_CASE("profile child" * doctest::skip()) {
  manual_seed(3);
  Tensor w = randn({32, 16});
  auto f = jit([&](Tensor x) { return model(x, w); }, "logged");
  Tensor x = randn({8, 32});
  for (int i = 0; i < 3; ++i) f(x);
  std::printf("steps=%lld\n", static_cast<long long>(f.stats().kernels));
}

TEST_CASE("KILN_LOG=profile writes the trace at exit and says where") {
  const fs::path dir = fresh_dir("kiln_profile_log");
  fs::create_directories(dir);
  const std::string cmd = "cd '" + dir.string() + "' && KILN_LOG=profile '" + KILN_BINARY_DIR +
                          "/tests/test_frontend' --no-skip -tc='profile child' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  CHECK(::pclose(p) == 0);
  CAPTURE(out);
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(R"(steps=(\d+))")));
  const int64_t steps = std::stoll(m[1]);
  REQUIRE(std::regex_search(
      out, m,
      std::regex(
          R"(kiln profile: trace of (\d+) plan steps written to (\S+\.json); open it at https://ui.perfetto.dev)")));
  CHECK(std::stoll(m[1]) == 3 * steps);  // three calls
  const fs::path file = m[2].str();
  CHECK(file.parent_path() == fs::canonical(dir));
  json trace = json::parse(read_text(file));
  CHECK(static_cast<int64_t>(events_of(trace, "step").size()) == 3 * steps);
  CHECK(events_of(trace, "call").size() == 3);
  CHECK(has(out, "ms in plan steps"));  // the totals, as before
  fs::remove_all(dir);
}

TEST_CASE("a convolutional training step's kernel picture renders") {
  // Graphviz 2.43 failed on this picture ("trouble in init_rank") with its
  // default ranking of clusters; the dump now asks for newrank.
  if (!have_dot()) {
    MESSAGE("Graphviz's dot is not installed: nothing to render (apt-get install graphviz)");
    return;
  }
  manual_seed(3);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::ReLU(),
                     nn::MaxPool2d(nn::MaxPool2dOptions(2)),
                     nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)), nn::ReLU(),
                     nn::MaxPool2d(nn::MaxPool2dOptions(2)), nn::Flatten(), nn::Dropout(0.1),
                     nn::Linear(128, 10));
  optim::Adam opt(net->parameters(), optim::AdamOptions(5e-3));
  auto step = jit(
      [&](Tensor x, Tensor y) {
        opt.zero_grad();
        Tensor loss = nn::functional::cross_entropy(net(x), y);
        loss.backward();
        opt.step();
        return loss;
      },
      "cnn_step");
  const fs::path dir = fresh_dir("kiln_cnn_pictures");
  step.dump(dir.string(), randn({64, 1, 8, 8}), randint(0, 10, {64}));
  const fs::path sig = dir / "cnn_step" / "f32-64x1x8x8_i64-64";
  REQUIRE(fs::exists(sig / "summary.txt"));
  const std::string summary = read_text(sig / "summary.txt");
  CAPTURE(summary.substr(summary.rfind("pictures:")));
  for (const std::string name : {"traced", "optimized", "fused"}) {
    CAPTURE(name);
    // On a loaded machine dot can pass the dump's time limit on this picture
    // (its traced graph took 13 s of CPU, 50 s by the clock at load 10): the
    // summary says so, and that is not the rendering failure this test is for.
    if (has(summary, name + ".dot (no svg: dot took more than")) {
      MESSAGE("dot passed its time limit on " << name << ".dot (a loaded machine): not checked");
      continue;
    }
    CHECK(fs::exists(sig / (name + ".svg")));
    CHECK(has(summary, name + ".svg"));
  }
  fs::remove_all(dir);
}

}  // namespace kiln
