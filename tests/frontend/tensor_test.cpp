// Tensor creation, views, elementwise ops, reductions, dtypes and printing.
#include "test_util.h"

using namespace kiln;
using kiln::test::check_close;

TEST_CASE("creation") {
  Tensor a = tensor({1.f, 2.f, 3.f});
  CHECK(a.dtype() == kFloat32);
  CHECK(a.sizes() == Shape{3});
  CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(tensor({1, 2}).dtype() == kInt64);
  CHECK(tensor({true, false}).dtype() == kBool);
  CHECK(tensor({{1.f, 2.f}, {3.f, 4.f}}).sizes() == Shape{2, 2});
  CHECK(zeros({2, 3}).sum().item<float>() == 0);
  CHECK(ones({2, 3}).sum().item<float>() == 6);
  CHECK(full({2}, 7).to_vector<float>() == std::vector<float>{7, 7});
  CHECK(arange(5).dtype() == kInt64);
  CHECK(arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(0.0, 1.0, 0.25).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  CHECK(linspace(0, 1, 5).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1});
  CHECK(eye(2).to_vector<float>() == std::vector<float>{1, 0, 0, 1});
  float blob[6] = {1, 2, 3, 4, 5, 6};
  Tensor b = from_blob(blob, {2, 3});
  CHECK(b.sum().item<float>() == 21);
  blob[0] = 10;  // no copy: the tensor sees the change
  CHECK(b.sum().item<float>() == 30);
}

TEST_CASE("random numbers are repeatable with manual_seed") {
  manual_seed(0);
  Tensor a = randn({1000});
  manual_seed(0);
  Tensor b = randn({1000});
  CHECK(equal(a, b));
  double mean = a.mean().item<float>(), sd = a.std().item<float>();
  CHECK(std::abs(mean) < 0.1);
  CHECK(std::abs(sd - 1) < 0.1);
  Tensor u = rand({1000});
  CHECK(u.min().item<float>() >= 0);
  CHECK(u.max().item<float>() < 1);
}

TEST_CASE("views share storage and compose") {
  Tensor a = arange(6).to(kFloat32);
  Tensor m = a.reshape({2, -1});
  CHECK(m.sizes() == Shape{2, 3});
  Tensor t = m.t();
  CHECK(t.sizes() == Shape{3, 2});
  CHECK(!t.is_contiguous());
  CHECK(t.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(t.contiguous().is_contiguous());
  CHECK(m.select(1, 2).to_vector<float>() == std::vector<float>{2, 5});
  CHECK(m[1].to_vector<float>() == std::vector<float>{3, 4, 5});
  CHECK(a.slice(0, 1, 6, 2).to_vector<float>() == std::vector<float>{1, 3, 5});
  CHECK(a.slice(0, 3).to_vector<float>() == std::vector<float>{3, 4, 5});  // to the end
  CHECK(m.slice(1).sizes() == Shape{2, 3});
  CHECK(a.slice().sizes() == a.sizes());
  CHECK(a.narrow(0, 2, 3).to_vector<float>() == std::vector<float>{2, 3, 4});
  CHECK(m.unsqueeze(0).sizes() == Shape{1, 2, 3});
  CHECK(m.unsqueeze(0).squeeze().sizes() == Shape{2, 3});
  CHECK(m.flatten().sizes() == Shape{6});
  CHECK(tensor({1.f, 2.f}).reshape({2, 1}).expand({2, 3}).to_vector<float>() ==
        std::vector<float>{1, 1, 1, 2, 2, 2});
  CHECK(m.permute({1, 0}).to_vector<float>() == t.to_vector<float>());
  // A write through a view is seen by the base.
  m.select(0, 0).fill_(9);
  CHECK(a.to_vector<float>() == std::vector<float>{9, 9, 9, 3, 4, 5});
  // Ops on non-contiguous views.
  CHECK((t * 2).to_vector<float>() == std::vector<float>{18, 6, 18, 8, 18, 10});
  CHECK(t.sum(0).to_vector<float>() == std::vector<float>{27, 12});
}

TEST_CASE("elementwise math and broadcasting") {
  Tensor x = tensor({-1.f, 0.f, 2.f});
  CHECK((x + 1).to_vector<float>() == std::vector<float>{0, 1, 3});
  CHECK((1 - x).to_vector<float>() == std::vector<float>{2, 1, -1});
  CHECK((x * x).to_vector<float>() == std::vector<float>{1, 0, 4});
  CHECK((x / 2).to_vector<float>() == std::vector<float>{-0.5f, 0, 1});
  CHECK((-x).to_vector<float>() == std::vector<float>{1, -0.f, -2});
  CHECK(x.abs().to_vector<float>() == std::vector<float>{1, 0, 2});
  CHECK(x.relu().to_vector<float>() == std::vector<float>{0, 0, 2});
  CHECK(x.clamp(-0.5, 1).to_vector<float>() == std::vector<float>{-0.5f, 0, 1});
  CHECK(x.pow(2).to_vector<float>() == std::vector<float>{1, 0, 4});
  check_close(x.exp(), tensor({std::exp(-1.f), 1.f, std::exp(2.f)}));
  check_close(x.sigmoid(), tensor({1 / (1 + std::exp(1.f)), 0.5f, 1 / (1 + std::exp(-2.f))}));
  check_close(x.tanh(), tensor({std::tanh(-1.f), 0.f, std::tanh(2.f)}));
  check_close(tensor({4.f, 9.f}).sqrt(), tensor({2.f, 3.f}));
  check_close(tensor({4.f}).rsqrt(), tensor({0.5f}));
  check_close(tensor({1.f}).gelu(), tensor({0.8413447f}), 1e-5);
  Tensor col = tensor({1.f, 2.f}).reshape({2, 1});
  Tensor row = tensor({10.f, 20.f, 30.f});  // [3]
  CHECK((col + row).sizes() == Shape{2, 3});
  CHECK((col + row).to_vector<float>() == std::vector<float>{11, 21, 31, 12, 22, 32});
  CHECK(maximum(x, zeros({3})).to_vector<float>() == std::vector<float>{0, 0, 2});
  CHECK(where(x > 0, x, zeros({3}) - 5).to_vector<float>() == std::vector<float>{-5, -5, 2});
  CHECK((x > 0).dtype() == kBool);
  CHECK((x == 0).to_vector<bool>() == std::vector<bool>{false, true, false});
}

TEST_CASE("type promotion follows PyTorch") {
  Tensor i = tensor({1, 2, 3});           // int64
  Tensor f = tensor({0.5f, 1.5f, 2.5f});  // float32
  CHECK((i * f).dtype() == kFloat32);
  CHECK((i * f).to_vector<float>() == std::vector<float>{0.5f, 3, 7.5f});
  CHECK((i * 2).dtype() == kInt64);
  CHECK((i * 2.5).dtype() == kFloat32);
  CHECK((i / 2).dtype() == kFloat32);  // true division
  CHECK((f.to(kFloat64) * 2.5).dtype() == kFloat64);
  CHECK(i.sum().dtype() == kInt64);
  CHECK(i.to(kInt32).dtype() == kInt32);
  CHECK((i.to(kInt32) + i).dtype() == kInt64);
  CHECK((tensor({true}) + tensor({true})).dtype() == kBool);
}

TEST_CASE("reductions") {
  Tensor m = tensor({{1.f, 5.f, 3.f}, {4.f, 2.f, 6.f}});
  CHECK(m.sum().item<float>() == 21);
  CHECK(m.sum(0).to_vector<float>() == std::vector<float>{5, 7, 9});
  CHECK(m.sum(1, true).sizes() == Shape{2, 1});
  CHECK(m.sum(-1).to_vector<float>() == std::vector<float>{9, 12});
  CHECK(m.mean().item<float>() == 3.5f);
  CHECK(m.mean(1).to_vector<float>() == std::vector<float>{3, 4});
  CHECK(m.max().item<float>() == 6);
  CHECK(m.min().item<float>() == 1);
  auto [vals, idx] = m.max(1);
  CHECK(vals.to_vector<float>() == std::vector<float>{5, 6});
  CHECK(idx.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(m.argmax().item<int64_t>() == 5);
  CHECK(m.argmin(1).to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  check_close(m.var(), scalar_tensor(3.5f));
  check_close(m.var({1}, false), tensor({8.f / 3, 8.f / 3}));
  check_close(m.std({1}), tensor({2.f, 2.f}));
  Tensor s = m.softmax(1);
  check_close(s.sum(1), tensor({1.f, 1.f}));
  check_close(m.log_softmax(1).exp(), s, 1e-5);
  float e1 = std::exp(1.f), e5 = std::exp(5.f), e3 = std::exp(3.f);
  CHECK(s[0][1].item<float>() == doctest::Approx(e5 / (e1 + e5 + e3)));
}

TEST_CASE("matmul shapes") {
  Tensor a = ones({2, 3}), b = ones({3, 4});
  CHECK(a.matmul(b).sizes() == Shape{2, 4});
  CHECK(a.matmul(b).sum().item<float>() == 24);
  CHECK(a.mm(b).sizes() == Shape{2, 4});
  CHECK(ones({3}).matmul(ones({3})).dim() == 0);
  CHECK(ones({3}).matmul(ones({3})).item<float>() == 3);
  CHECK(a.matmul(ones({3})).sizes() == Shape{2});
  CHECK(ones({5, 2, 3}).bmm(ones({5, 3, 4})).sizes() == Shape{5, 2, 4});
  CHECK(ones({5, 2, 3}).matmul(ones({3, 4})).sizes() == Shape{5, 2, 4});
  Tensor x = tensor({{1.f, 2.f}, {3.f, 4.f}});
  CHECK(x.matmul(x.t()).to_vector<float>() == std::vector<float>{5, 11, 11, 25});
  CHECK(x.to(kFloat64).matmul(x.to(kFloat64)).to_vector<double>() ==
        std::vector<double>{7, 10, 15, 22});
}

TEST_CASE("in-place ops") {
  Tensor a = ones({3});
  a += 1;
  a *= tensor({1.f, 2.f, 3.f});
  a -= 1;
  a /= 2;
  CHECK(a.to_vector<float>() == std::vector<float>{0.5f, 1.5f, 2.5f});
  a.zero_();
  CHECK(a.sum().item<float>() == 0);
  a.fill_(3).add_(ones({3}), 2);
  CHECK(a.to_vector<float>() == std::vector<float>{5, 5, 5});
  Tensor i = tensor({1, 2});
  i.mul_(3);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{3, 6});
}

TEST_CASE("printing looks like PyTorch") {
  CHECK(tensor({1.f, 2.f, 3.f}).str() == "tensor([1., 2., 3.])");
  CHECK(tensor({1.5f, -2.25f}).str() == "tensor([ 1.5000, -2.2500])");
  CHECK(tensor({{1.f, 2.f}, {3.f, 4.f}}).str() == "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK(tensor({1, 2, 3}).str() == "tensor([1, 2, 3])");
  CHECK(tensor({true, false}).str() == "tensor([ True, False])");
  CHECK(scalar_tensor(6.f).str() == "tensor(6.)");
  CHECK(tensor({1.f}).to(kFloat64).str() == "tensor([1.], dtype=torch.float64)");
  CHECK(tensor({1.f}).requires_grad_().str() == "tensor([1.], requires_grad=True)");
  Tensor x = tensor({2.f}).requires_grad_();
  CHECK((x * 3).str() == "tensor([6.], grad_fn=<MulBackward0>)");
  CHECK(tensor({1e-5f, 1.f}).str() == "tensor([1.0000e-05, 1.0000e+00])");
  std::string big = arange(2000).str();
  CHECK(big.find("...") != std::string::npos);
}
