// Bad input, tried as a new user would: each row is an input, the substring its
// kiln::Error must contain and the user's line it must name. Then the cases a
// table cannot hold: an index checked when a compiled plan runs, and two threads
// calling a traced function for the first time at once.
#include "test_util.h"

#include <latch>
#include <thread>

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

struct BadInput {
  const char* what;
  std::function<void()> run;
  const char* expected;
  int line;  // the line of this file the error must name
};

std::string line_of(int line) {
  return "bad_input_test.cpp:" + std::to_string(line);
}

Tensor leaf() {
  return ones({3}).requires_grad_();
}

}  // namespace

TEST_CASE("bad input: each error says what was expected and names the user's line") {
  const Tensor logits = ones({2, 5}), labels = tensor({1, 5});
  // One row per line: the op runs on the line __LINE__ names.
  // clang-format off
  const BadInput rows[] = {
    {"sizes whose product overflows", [] { (void)zeros({(int64_t(1) << 62) + 1, 4}).sum(0); }, "is too large: its element count does not fit in 64 bits", __LINE__},
    {"empty() of 2^80 elements", [] { (void)empty({int64_t(1) << 40, int64_t(1) << 40}); }, "is too large", __LINE__},
    {"more memory than any machine has", [] { (void)zeros({int64_t(1) << 50}); }, "out of CPU memory", __LINE__},
    {"class index >= C", [&] { (void)F::cross_entropy(logits, labels); }, "cross_entropy: index 5 is out of range for size 5 (expected 0 <= index < 5)", __LINE__},
    {"one_hot index >= num_classes", [] { (void)F::one_hot(tensor({0, 3}), 3); }, "one_hot: index 3 is out of range for size 3", __LINE__},
    {"negative class index", [&] { (void)F::cross_entropy(logits, tensor({-1, 0})); }, "cross_entropy: index -1 is out of range", __LINE__},
    {"max of an empty tensor", [] { (void)zeros({0}).max(); }, "max: expected reduction dim 0 to have a non-zero size, got input shape [0]", __LINE__},
    {"amax over an empty dim", [] { (void)zeros({2, 0}).amax({1}); }, "non-zero size", __LINE__},
    {"argmax of an empty tensor", [] { (void)zeros({0}).argmax(); }, "argmax:", __LINE__},
    {"softmax over a missing dim", [] { (void)ones({2, 3}).softmax(2); }, "softmax: dim 2 is out of range for a tensor of rank 2", __LINE__},
    {"log_softmax over a missing dim", [] { (void)ones({2, 3}).log_softmax(-3); }, "log_softmax: dim -3 is out of range", __LINE__},
    {"x[i] out of range", [] { (void)ones({2, 3})[2]; }, "out of range", __LINE__},
    {"x *= 2 on a leaf that requires grad", [] { Tensor x = leaf(); x *= 2; }, "a leaf tensor that requires grad was modified in place", __LINE__},
    {"x += 1 on a leaf that requires grad", [] { Tensor x = leaf(); x += 1; }, "a leaf tensor that requires grad was modified in place", __LINE__},
    {"traced max of an empty tensor", [] { (void)jit([](Tensor x) { return x.max(); })(zeros({0})); }, "max: expected reduction", __LINE__},
    {"traced cross_entropy, class index >= C", [&] { (void)jit([](Tensor l, Tensor t) { return F::cross_entropy(l, t); })(logits, labels); }, "cross_entropy: index 5 is out of range for size 5", __LINE__},
  };
  // clang-format on
  for (const BadInput& row : rows) {
    CAPTURE(row.what);
    const std::string msg = test::error_of(row.run);
    CHECK_MESSAGE(msg.find(row.expected) != std::string::npos, msg);
    CHECK_MESSAGE(msg.find(line_of(row.line)) != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("tensor.h") == std::string::npos, msg);
    CHECK_MESSAGE(msg.find("tensor_ops.cpp") == std::string::npos, msg);
  }
  // Creation ops are named by what the user called, never the internal `constant`.
  CHECK(test::error_of([] { (void)zeros({int64_t(1) << 50}); }).find("constant") ==
        std::string::npos);
}

TEST_CASE("empty reductions and softmax match PyTorch, eager and traced") {
  Tensor e = zeros({0, 3});
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    auto run = [&](const std::function<Tensor(Tensor)>& f) {
      return traced ? jit([f](Tensor x) { return f(x); })(e) : f(e);
    };
    CHECK(run([](Tensor x) { return x.softmax(0); }).sizes() == Shape{0, 3});
    CHECK(run([](Tensor x) { return x.log_softmax(0); }).sizes() == Shape{0, 3});
    CHECK(run([](Tensor x) { return x.softmax(1); }).sizes() == Shape{0, 3});
    CHECK(run([](Tensor x) { return x.amax({1}); }).sizes() == Shape{0});
    Tensor s = run([](Tensor x) { return x.sum(0); });
    CHECK(s.to_vector<float>() == std::vector<float>{0, 0, 0});
    CHECK_THROWS_AS(run([](Tensor x) { return x.amax({0}); }), Error);
    CHECK_THROWS_AS(run([](Tensor x) { return x.max(); }), Error);
  }
}

TEST_CASE("cross_entropy indices are checked eagerly and when a compiled plan runs") {
  Tensor logits = randn({3, 4});
  auto loss = jit([](Tensor l, Tensor t) { return F::cross_entropy(l, t); }, "loss");
  Tensor good = tensor({0, 3, 2});
  // In range: compiled and eager agree.
  test::check_close(loss(logits, good), F::cross_entropy(logits, good), 1e-5, 1e-6);
  // The same compiled plan (no retrace: same signature) raises at run time, naming
  // the op and the line inside the traced lambda that recorded the check.
  for (std::vector<int64_t> bad : {std::vector<int64_t>{0, 4, 1}, {-2, 0, 1}}) {
    const std::string msg = test::error_of([&] {
      (void)loss(logits, tensor({bad[0], bad[1], bad[2]}));
    });
    CAPTURE(msg);
    CHECK(msg.find("cross_entropy: index " + std::to_string(bad[0] < 0 ? bad[0] : bad[1]) +
                   " is out of range for size 4") != std::string::npos);
    CHECK(msg.find("bad_input_test.cpp:") != std::string::npos);
  }
  CHECK(loss.stats().misses == 1);
  // A failed check leaves the function usable.
  test::check_close(loss(logits, good), F::cross_entropy(logits, good), 1e-5, 1e-6);
  // int32 labels and a captured (parameter) label tensor are checked too.
  CHECK_THROWS_AS(F::cross_entropy(logits, tensor({0, 1, 9}).to(kInt32)), Error);
  Tensor captured = tensor({0, 1, 2});
  auto with_captured = jit([&](Tensor l) { return F::cross_entropy(l, captured); });
  (void)with_captured(logits);
  captured.copy_(tensor({0, 7, 2}));
  CHECK_THROWS_WITH_AS(with_captured(logits), doctest::Contains("index 7"), Error);
}

TEST_CASE("two threads calling a traced function first at once compile it once") {
  for (int round = 0; round < 3; ++round) {
    auto f = jit([](Tensor x) { return (x * 3 + 1).tanh().sum(1); }, "shared");
    Tensor x = randn({16, 32});
    Tensor want = (x * 3 + 1).tanh().sum(1);
    constexpr int kThreads = 4;
    std::latch start(kThreads);
    std::vector<Tensor> got(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        got[t] = f(x);
      });
    for (auto& th : threads) th.join();
    for (const Tensor& g : got) test::check_close(g, want, 1e-5, 1e-6);
    CHECK(f.stats().misses == 1);
    CHECK(f.stats().hits == kThreads - 1);
    CHECK(f.stats().calls == kThreads);
  }
}
