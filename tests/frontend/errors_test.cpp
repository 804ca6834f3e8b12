// Bad input gives a kiln::Error that says what was expected, what came, and
// which user source line recorded the op.
#include "test_util.h"

#include "ir/parser.h"

using namespace kiln;

namespace {
std::string line_ref(int line) { return "errors_test.cpp:" + std::to_string(line); }
}  // namespace

TEST_CASE("shape mismatch and bad broadcast name both shapes and the line") {
  Tensor a = ones({3}), b = ones({4});
  int line = __LINE__ + 1;
  std::string msg = test::error_of([&] { (void)(a + b); });
  CHECK(msg.find("[3]") != std::string::npos);
  CHECK(msg.find("[4]") != std::string::npos);
  CHECK(msg.find(line_ref(line)) != std::string::npos);
  line = __LINE__ + 1;
  msg = test::error_of([&] { (void)ones({2, 3}).matmul(ones({4, 5})); });
  CHECK(msg.find("matmul") != std::string::npos);
  CHECK(msg.find("[2,3]") != std::string::npos);
  CHECK(msg.find(line_ref(line)) != std::string::npos);
}

TEST_CASE("wrong dtype") {
  int line = __LINE__ + 1;
  std::string msg = test::error_of([&] { (void)tensor({1, 2}).mean(); });
  CHECK(msg.find("floating") != std::string::npos);
  CHECK(msg.find("i64") != std::string::npos);
  CHECK(msg.find(line_ref(line)) != std::string::npos);
  KILN_CHECK_ERROR(tensor({1, 2}).requires_grad_(), "floating", "i64");
  KILN_CHECK_ERROR(where(ones({2}), ones({2}), ones({2})), "where", "bool");
  Tensor i = tensor({1, 2});
  KILN_CHECK_ERROR(i.add_(0.5), "cannot be written", "f32", "i64");
}

TEST_CASE("item() on many elements") {
  int line = __LINE__ + 1;
  std::string msg = test::error_of([&] { (void)ones({2, 3}).item<float>(); });
  CHECK(msg.find("one element") != std::string::npos);
  CHECK(msg.find("[2,3]") != std::string::npos);
  CHECK(msg.find(line_ref(line)) != std::string::npos);
}

TEST_CASE("out-of-range dim") {
  int line = __LINE__ + 1;
  std::string msg = test::error_of([&] { (void)ones({2, 3}).sum(2); });
  CHECK(msg.find("out of range") != std::string::npos);
  CHECK(msg.find(line_ref(line)) != std::string::npos);
  KILN_CHECK_ERROR(ones({2, 3}).transpose(0, -3), "out of range");
  KILN_CHECK_ERROR(ones({2, 3}).select(1, 3), "out of range", "size 3");
  KILN_CHECK_ERROR(ones({6}).reshape({4, -1}), "reshape");
  KILN_CHECK_ERROR(ones({6}).view({7}), "reshape");
}

TEST_CASE("backward misuse") {
  Tensor x = tensor({1.f, 2.f}).requires_grad_();
  int mul_line = __LINE__ + 1;
  Tensor y = x * x;
  int line = __LINE__ + 1;
  std::string msg = test::error_of([&] { y.backward(); });
  CHECK(msg.find("scalar") != std::string::npos);
  CHECK(msg.find(line_ref(line)) != std::string::npos);
  Tensor s = y.sum();
  s.backward();
  msg = test::error_of([&] { s.backward(); });
  CHECK(msg.find("second time") != std::string::npos);
  CHECK(msg.find(line_ref(mul_line)) != std::string::npos);  // the op whose saved tensors were freed
}

TEST_CASE("malformed IR text") {
  KILN_CHECK_ERROR(parse_graph("%0 = arg {index=0} : f32[3]\n%1 = frobnicate %0 : f32[3]\n"),
                   "frobnicate");
  KILN_CHECK_ERROR(parse_graph("%0 = arg {index=0} : f32[3]\n%1 = add %0, %7 : f32[3]\n"), "%7");
}

TEST_CASE("undefined tensors") {
  Tensor u;
  KILN_CHECK_ERROR(ones({2}) + u, "undefined");
  KILN_CHECK_ERROR(u.sum(), "undefined");
}
