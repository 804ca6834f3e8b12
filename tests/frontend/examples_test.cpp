// The course examples run and print the numbers the course expects.
#include "test_util.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <regex>

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int rc = pclose(p);
  CHECK_MESSAGE(rc == 0, "command failed: ", cmd, "\n", out);
  return out;
}

std::string example(const char* name) {
  return std::string(KILN_BINARY_DIR) + "/examples/" + name;
}

// All "loss <number>" values in order.
std::vector<double> losses(const std::string& text) {
  std::vector<double> out;
  std::regex re("loss ([-0-9.e+]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it)
    out.push_back(std::stod((*it)[1].str()));
  return out;
}

}  // namespace

TEST_CASE("exercise 1: tensor basics") {
  std::string out = run(example("tensor_basics"));
  CHECK(out.find("item = 21") != std::string::npos);
  CHECK(out.find("tensor([[1.],\n        [2.],") != std::string::npos);
  CHECK(out.find("tensor([0.5000, 3.0000, 7.5000]) (float32)") != std::string::npos);
}

TEST_CASE("exercise 2: tangent lines") {
  std::string svg = std::string(KILN_BINARY_DIR) + "/tests/tangent_test.svg";
  std::string out = run(example("tangent_lines") + " " + svg);
  CHECK(out.find("slope f1'(-1) = -1.5") != std::string::npos);
  CHECK(out.find("slope f2'(-1) = 0.5") != std::string::npos);
  CHECK(out.find("x.grad() = -1 ") != std::string::npos);
  std::ifstream f(svg);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(text.find("<svg") != std::string::npos);
  CHECK(text.find("</svg>") != std::string::npos);
  CHECK(text.find("polyline") != std::string::npos);
}

TEST_CASE("exercise 3: the two-layer net's loss falls in all three versions") {
  std::string out = run(example("two_layer_net"));
  auto l = losses(out);
  REQUIRE(l.size() == 18);  // 6 reports per version
  for (int v = 0; v < 3; ++v) {
    double first = l[v * 6], last = l[v * 6 + 5];
    CHECK_MESSAGE(last < 0.01 * first, "version ", v, ": ", first, " -> ", last);
  }
}

// Runs a digits example for `epochs`: both modes must pass `min_accuracy`. Then
// for one epoch, where the weights must agree within `max_diff` (the same
// draws; f32 sums in another order). Over more epochs Adam grows those rounding
// differences chaotically (after two epochs 2e-7 on an AVX-512 Xeon, 5e-4 on a
// Zen 3, where one ReLU input within rounding of zero took another side at step
// 29; 0.1 after ten), so only the short run says whether the two modes compute
// the same steps; train_test's lockstep MLP checks every step from one state.
static void check_digits(const char* name, int epochs, double min_accuracy, double max_diff) {
  const std::string svg = std::string(KILN_BINARY_DIR) + "/tests/" + name + "_test.svg";
  const std::string out = run(example(name) + " " + std::to_string(epochs) + " " + svg);
  CAPTURE(out);
  const size_t e = out.find("eager : test accuracy "), t = out.find("traced: test accuracy ");
  REQUIRE(e != std::string::npos);
  REQUIRE(t != std::string::npos);
  CHECK(std::stod(out.substr(e + 22)) > min_accuracy);
  CHECK(std::stod(out.substr(t + 22)) > min_accuracy);
  CHECK(std::ifstream(svg).good());
  const std::string short_run = run(example(name) + " 1 " + svg);
  CAPTURE(short_run);
  const size_t d = short_run.find("traced vs eager: ");
  REQUIRE(d != std::string::npos);
  CHECK(std::stod(short_run.substr(d + 17)) < max_diff);
}

TEST_CASE("digits_mlp: eager and traced both learn the digits, with the same dropout draws") {
  check_digits("digits_mlp", 12, 94, 1e-5);
}

TEST_CASE("digits_cnn: convolutions and pooling learn the digits in both modes") {
  check_digits("digits_cnn", 10, 96, 1e-5);
}

TEST_CASE(
    "char_transformer: a traced transformer learns the README well below its unigram entropy") {
  const std::string svg = std::string(KILN_BINARY_DIR) + "/tests/char_transformer_test.svg";
  const std::string out = run(example("char_transformer") + " 300 " + svg);
  CAPTURE(out);
  const size_t h = out.find("unigram entropy "), f = out.find("final train loss ");
  const size_t e = out.find("eval mode: train loss "), v = out.find(", validation loss ");
  const size_t s = out.find("sample ("), c = out.find("\nloss curve: ");
  CHECK(out.find("output layer: Linear(64, ") != std::string::npos);  // not the adaptive softmax
  REQUIRE(h != std::string::npos);
  REQUIRE(f != std::string::npos);
  REQUIRE(e != std::string::npos);
  REQUIRE(v != std::string::npos);
  REQUIRE(s != std::string::npos);
  REQUIRE(c != std::string::npos);
  const double entropy = std::stod(out.substr(h + 16)), final_train = std::stod(out.substr(f + 17));
  const double train = std::stod(out.substr(e + 22)), valid = std::stod(out.substr(v + 18));
  CHECK(entropy > 2);
  CHECK(entropy < 5);
  // The loss curve falls, and the model does far better than character frequencies alone.
  const auto l = losses(out.substr(0, f));
  REQUIRE(l.size() == 10);
  CHECK(l.back() < l.front());
  CHECK(final_train < 0.8 * entropy);
  CHECK(train < 0.8 * entropy);
  CHECK(valid < 0.8 * entropy);
  // A sampled line: 200 characters (the README is ASCII) after the header's line.
  const size_t line = out.find('\n', s);
  REQUIRE(line < c);
  CHECK(c - line - 1 >= 200);
  CHECK(std::ifstream(svg).good());
}

TEST_CASE(
    "char_transformer --vocab words: a word-level model with an adaptive softmax learns, eager and "
    "traced alike") {
  const std::string svg = std::string(KILN_BINARY_DIR) + "/tests/char_transformer_words.svg";
  const std::string cmd = example("char_transformer") + " --vocab words 20 " + svg;
  const std::string traced = run(cmd), eager = run("KILN_JIT=0 " + cmd);
  CAPTURE(traced);
  CAPTURE(eager);
  // The README's words: <unk> and every distinct token (fewer than 10,000), none unknown.
  const size_t w = traced.find("vocabulary ");
  REQUIRE(w != std::string::npos);
  const std::string line = traced.substr(w, traced.find('\n', w) - w);
  const long long vocab = std::stoll(line.substr(11));
  CHECK(line.find(std::to_string(vocab) + " words (<unk> and the " + std::to_string(vocab - 1) +
                  " most frequent of " + std::to_string(vocab - 1) +
                  " distinct; 0 tokens <unk>)") != std::string::npos);
  CHECK(vocab > 1000);
  CHECK(vocab <= 10001);
  // The same vocabulary both runs (it depends on the text alone), the loss
  // falls, and eager steps give the traced steps' losses.
  CHECK(eager.find(line) != std::string::npos);
  CHECK(traced.find("traced step: the first") != std::string::npos);
  CHECK(eager.find("eager step (KILN_JIT=0): the first") != std::string::npos);
  const size_t ft = traced.find("final train loss "), fe = eager.find("final train loss ");
  REQUIRE(ft != std::string::npos);
  REQUIRE(fe != std::string::npos);
  const auto lt = losses(traced.substr(0, ft)), le = losses(eager.substr(0, fe));
  REQUIRE(lt.size() == 10);
  REQUIRE(le.size() == lt.size());
  CHECK(lt.back() < lt.front() - 0.5);
  for (size_t i = 0; i < lt.size(); ++i) CHECK(le[i] == doctest::Approx(lt[i]).epsilon(1e-3));
  // The output layer is the adaptive softmax (256 words in the head, clusters
  // of 4x as many each, as many as the vocabulary needs: the README's words
  // grow with it), in both runs.
  std::string cutoffs;
  for (long long c = 256; c < vocab; c *= 4) cutoffs += (cutoffs.empty() ? "" : ", ") + std::to_string(c);
  const size_t a = traced.find("output layer: adaptive softmax, cutoffs {" + cutoffs + "}");
  REQUIRE(a != std::string::npos);
  CHECK(eager.find(traced.substr(a, traced.find('\n', a) - a)) != std::string::npos);
  // The weights the traced steps trained are the eager steps' weights: the
  // same losses in eval mode (computed eagerly in both runs).
  const size_t et = traced.find("eval mode: train loss "),
               ee = eager.find("eval mode: train loss ");
  REQUIRE(et != std::string::npos);
  REQUIRE(ee != std::string::npos);
  CHECK(std::stod(eager.substr(ee + 22)) ==
        doctest::Approx(std::stod(traced.substr(et + 22))).epsilon(1e-3));
}
