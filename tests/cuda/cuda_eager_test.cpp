// Eager tensors on a CUDA device against the same ops on the CPU: transfers,
// elementwise ops with broadcasting and views, reductions, matmul through
// cuBLAS, in-place updates, autograd. Each test skips without a GPU.
#include "frontend/device_ops.h"
#include "cuda_device_util.h"
#include "runtime/allocator.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("transfers round-trip every dtype, views included, and item() reads back") {
  KILN_REQUIRE_GPU();
  manual_seed(1);
  Tensor x = randn({5, 7});
  Tensor g = x.to(kCUDA);
  CHECK(g.is_cuda());
  CHECK(g.device() == Device(kCUDA, 0));
  CHECK(equal(g.cpu(), x));
  CHECK(equal(x.t().cuda().cpu(), x.t().contiguous()));  // non-contiguous source
  CHECK(equal(g.t().cpu(), x.t().contiguous()));         // non-contiguous on the device
  CHECK(equal(g.slice(1, 1, 6, 2).cpu(), x.slice(1, 1, 6, 2).contiguous()));
  for (DType dt : {DType::f64, DType::i64, DType::i32, kBool}) {
    Tensor h = x.gt(0).to(dt);
    CHECK(equal(h.cuda().cpu(), h));
    CHECK(h.cuda().dtype() == dt);
  }
  CHECK(g.sum().item<float>() == doctest::Approx(x.sum().item<float>()).epsilon(1e-4));
  CHECK(g.to_vector<float>() == x.to_vector<float>());
  Tensor empty = zeros({0, 3}).cuda();
  CHECK(empty.numel() == 0);
  CHECK(empty.cpu().sizes() == Shape{0, 3});
  CHECK(x.cuda().str().find("device='cuda:0'") != std::string::npos);
  KILN_CHECK_ERROR(x.to(Device(kCUDA, 99)), "cuda:99 does not exist");
}

TEST_CASE("eager elementwise ops on CUDA match the CPU") {
  KILN_REQUIRE_GPU();
  manual_seed(2);
  Tensor a = randn({6, 8}), b = randn({8}), c = rand({6, 1}) + 0.5;
  Tensor ga = a.cuda(), gb = b.cuda(), gc = c.cuda();
  CHECK(close(ga + gb, a + b));
  CHECK(close(ga * 2 - 1, a * 2 - 1));
  CHECK(close(ga / gc, a / c));
  CHECK(close(gc.pow(2) + gc.log() + gc.sqrt() + gc.rsqrt(),
              c.pow(2) + c.log() + c.sqrt() + c.rsqrt()));
  for (auto f :
       {+[](const Tensor& t) { return t.exp(); }, +[](const Tensor& t) { return t.sin(); },
        +[](const Tensor& t) { return t.cos(); }, +[](const Tensor& t) { return t.tanh(); },
        +[](const Tensor& t) { return t.sigmoid(); }, +[](const Tensor& t) { return t.relu(); },
        +[](const Tensor& t) { return t.gelu(); }, +[](const Tensor& t) { return t.abs(); },
        +[](const Tensor& t) { return t.neg(); }, +[](const Tensor& t) { return t.sign(); }})
    CHECK(close(f(ga), f(a)));
  CHECK(close(maximum(ga, gb), maximum(a, b)));
  CHECK(close(minimum(ga, gc), minimum(a, c)));
  CHECK(equal(ga.lt(gb).cpu(), a.lt(b)));
  CHECK(equal((ga >= 0).cpu(), a >= 0));
  CHECK(close(where(ga > 0, ga, gb), where(a > 0, a, b)));
  CHECK(close(ga.clamp(-0.5, 0.5), a.clamp(-0.5, 0.5)));
  CHECK(equal((ga * 10).to(DType::i64).cpu() + 3, (a * 10).to(DType::i64) + 3));
  CHECK(close(ga.to(DType::f64), a.to(DType::f64), 1e-9, 1e-12));
}

TEST_CASE("eager CUDA ops read views: transposed, broadcast, sliced and gathered operands") {
  KILN_REQUIRE_GPU();
  manual_seed(3);
  Tensor a = randn({6, 8}), b = randn({8});
  Tensor ga = a.cuda(), gb = b.cuda();
  CHECK(close(ga.t() * 2, a.t() * 2));                                          // a permuted layout
  CHECK(close(gb.expand({6, 8}) + ga, b.expand({6, 8}) + a));                   // a broadcast view
  CHECK(close(ga.slice(1, 2, 6) * 3, a.slice(1, 2, 6) * 3));                    // a sliced window
  CHECK(close(ga[2] + 1, a[2] + 1));                                            // a selected row
  CHECK(close(ga.t().slice(0, 1, 7, 2).exp(), a.t().slice(0, 1, 7, 2).exp()));  // gathered
  CHECK(close(ga.t().reshape({48}), a.t().reshape({48})));  // reshape that copies
  CHECK(close(ga.t().contiguous(), a.t().contiguous()));
  CHECK(close(ga.unsqueeze(0).expand({3, 6, 8}).sum(0), a.unsqueeze(0).expand({3, 6, 8}).sum(0)));
}

TEST_CASE("eager CUDA reductions and row-wise ops match the CPU") {
  KILN_REQUIRE_GPU();
  manual_seed(4);
  Tensor a = randn({33, 300});
  Tensor ga = a.cuda();
  CHECK(close(ga.sum(), a.sum(), 1e-4, 1e-3));
  CHECK(close(ga.sum(1), a.sum(1), 1e-4, 1e-4));
  CHECK(close(ga.mean(0, true), a.mean(0, true)));
  CHECK(close(ga.max(), a.max()));
  CHECK(close(std::get<0>(ga.max(1)), std::get<0>(a.max(1))));
  CHECK(equal(std::get<1>(ga.min(1)).cpu(), std::get<1>(a.min(1))));
  CHECK(equal(ga.argmax(1).cpu(), a.argmax(1)));
  CHECK(close(ga.var(), a.var()));
  CHECK(close(ga.std({1}), a.std({1})));
  CHECK(close(ga.softmax(1), a.softmax(1)));
  CHECK(close(ga.log_softmax(0), a.log_softmax(0)));
  CHECK(close(ga.amax({0, 1}), a.amax({0, 1})));
}

TEST_CASE("eager CUDA creation ops match the CPU, random draws included") {
  KILN_REQUIRE_GPU();
  TensorOptions gpu = TensorOptions().device(kCUDA);
  CHECK(equal(zeros({3, 4}, gpu).cpu(), zeros({3, 4})));
  CHECK(equal(ones({5}, gpu).cpu(), ones({5})));
  CHECK(equal(full({2, 2}, 7, gpu).cpu(), full({2, 2}, 7)));
  CHECK(equal(arange(10, gpu).cpu(), arange(10)));
  CHECK(close(arange(0.5, 3.0, 0.25, gpu), arange(0.5, 3.0, 0.25)));
  CHECK(equal(eye(4, gpu).cpu(), eye(4)));
  CHECK(close(linspace(0, 1, 7, gpu), linspace(0, 1, 7)));
  // The same Philox counters on both devices: rand's bits are equal; randn's
  // Box-Muller (log1p, sqrt, cos) rounds as the device's math library does, a
  // few ulp from glibc's (seen on an H200).
  manual_seed(5);
  Tensor u = rand({3, 4}, gpu), r = randn({3, 4}, gpu);
  manual_seed(5);
  Tensor u_cpu = rand({3, 4}), r_cpu = randn({3, 4});
  CHECK(equal(u.cpu(), u_cpu));
  CHECK(close(r, r_cpu, 1e-6, 1e-6));
  CHECK(equal(tensor({1.f, 2.f, 3.f}, gpu).cpu(), tensor({1.f, 2.f, 3.f})));
}

TEST_CASE("eager matmul on CUDA goes through cuBLAS and matches OpenBLAS") {
  KILN_REQUIRE_CUBLAS();
  manual_seed(6);
  Tensor a = randn({64, 48}), b = randn({48, 40});
  CHECK(close(a.cuda().matmul(b.cuda()), a.matmul(b), 1e-4, 1e-4));
  CHECK(close(a.cuda().t().matmul(a.cuda()), a.t().matmul(a), 1e-4, 1e-3));  // a transposed operand
  Tensor x = randn({3, 4, 5}), y = randn({5, 6});
  CHECK(close(x.cuda().matmul(y.cuda()), x.matmul(y), 1e-4, 1e-4));  // one strided-batched call
  Tensor p = randn({2, 1, 4, 5}), q = randn({3, 5, 6});
  CHECK(close(p.cuda().matmul(q.cuda()), p.matmul(q), 1e-4, 1e-4));  // general broadcast
  Tensor v = randn({5});
  CHECK(close(x.cuda().matmul(v.cuda()), x.matmul(v), 1e-4, 1e-4));  // a vector operand
  Tensor d = randn({7, 9}).to(DType::f64), e = randn({9, 2}).to(DType::f64);
  CHECK(close(d.cuda().mm(e.cuda()), d.mm(e), 1e-10, 1e-10));
  Tensor i = arange(12).reshape({3, 4}), j = arange(8).reshape({4, 2});
  CHECK(equal(i.cuda().matmul(j.cuda()).cpu(), i.matmul(j)));  // integers: on the host
  CHECK(zeros({3, 0}).cuda().matmul(zeros({0, 2}).cuda()).cpu().sum().item<float>() == 0);
}

TEST_CASE("in-place updates on CUDA tensors and their views") {
  KILN_REQUIRE_GPU();
  Tensor g = zeros({4, 5}, TensorOptions().device(kCUDA));
  Tensor c = zeros({4, 5});
  g.add_(1);
  c.add_(1);
  g.slice(1, 1, 3).fill_(5);
  c.slice(1, 1, 3).fill_(5);
  g.t()[0].mul_(3);  // a strided column
  c.t()[0].mul_(3);
  CHECK(equal(g.cpu(), c));
  Tensor src = randn({4, 5});
  g.copy_(src.cuda());
  CHECK(equal(g.cpu(), src));
  KILN_CHECK_ERROR(g.copy_(src), "the value is on cpu but the tensor is on cuda:0");
  KILN_CHECK_ERROR(g + src, "expected all operands on one device", "cuda:0", "cpu");
}

TEST_CASE("autograd on CUDA tensors gives the CPU's gradients") {
  KILN_REQUIRE_CUBLAS();
  manual_seed(7);
  Tensor x = randn({8, 5}), w0 = randn({5, 3});
  Tensor w = w0.clone().requires_grad_();
  Tensor gw = w0.cuda().requires_grad_();
  auto loss = [](const Tensor& x, const Tensor& w) {
    return (x.matmul(w).tanh() * 2).pow(2).mean();
  };
  loss(x, w).backward();
  loss(x.cuda(), gw).backward();
  REQUIRE(gw.grad().defined());
  CHECK(gw.grad().is_cuda());
  CHECK(close(gw.grad(), w.grad(), 1e-4, 1e-5));
}

TEST_CASE("eager CUDA kernels compile once per op signature; device blocks are reused") {
  KILN_REQUIRE_GPU();
  Tensor g = randn({17, 3}).cuda();
  (void)(g * 3 + 1).exp();
  EagerCudaStats s0 = eager_cuda_stats();
  for (int i = 0; i < 5; ++i) (void)(g * 3 + 1).exp();
  EagerCudaStats s1 = eager_cuda_stats();
  CHECK(s1.compiled == s0.compiled);
  CHECK(s1.hits >= s0.hits + 15);
  AllocatorStats a0 = cuda_allocator_stats(0);
  for (int i = 0; i < 10; ++i) (void)empty({1000}, TensorOptions().device(kCUDA));
  AllocatorStats a1 = cuda_allocator_stats(0);
  CHECK(a1.cache_hits >= a0.cache_hits + 9);
}
