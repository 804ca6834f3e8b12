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

std::string example(const char* name) { return std::string(KILN_BINARY_DIR) + "/examples/" + name; }

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

TEST_CASE("digits_mlp: eager and traced both learn the digits, with the same dropout draws") {
  const std::string svg = std::string(KILN_BINARY_DIR) + "/tests/digits_test.svg";
  const std::string out = run(example("digits_mlp") + " 12 " + svg);
  CAPTURE(out);
  double acc_e = 0, acc_t = 0, diff = 1;
  const size_t e = out.find("eager : test accuracy "), t = out.find("traced: test accuracy ");
  const size_t d = out.find("traced vs eager: ");
  REQUIRE(e != std::string::npos);
  REQUIRE(t != std::string::npos);
  REQUIRE(d != std::string::npos);
  acc_e = std::stod(out.substr(e + 22));
  acc_t = std::stod(out.substr(t + 22));
  diff = std::stod(out.substr(d + 17));
  CHECK(acc_e > 94);
  CHECK(acc_t > 94);
  // The runs differ only by the order of f32 sums (the draws are the same stream).
  CHECK(diff < 0.05);
  CHECK(std::ifstream(svg).good());
}
