// Tracing JIT semantics: traced equals eager, retracing on new signatures with
// logged reasons, the bounded cache, parameters read by reference, the error
// on reading data inside a trace, the eager switch, KILN_CHECK, dumps.
#include "test_util.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "ir/parser.h"
#include "ir/printer.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

Tensor g_scale = tensor({2.f, 3.f, 4.f, 5.f});

KILN_TRACE(Tensor, chain8, Tensor x) {
  return ((x * 1.5f + 2).tanh().exp() - x.sigmoid()).relu() / (x * x + 1);
}

KILN_TRACE(Tensor, scaled, Tensor x) { return x * g_scale + 1; }

KILN_TRACE(Tensor, softmax_rows, Tensor x) { return x.softmax(1); }

int g_read_line = 0;
KILN_TRACE(Tensor, reads_data, Tensor x) {
  g_read_line = __LINE__ + 1;
  float v = x.sum().item<float>();
  return x * v;
}

KILN_TRACE(Tensor, with_number, Tensor x, double alpha) { return x * alpha; }

KILN_TRACE(std::vector<Tensor>, two_outputs, Tensor x, Tensor y) {
  return {x + y, (x * y).sum()};
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("a traced chain equals eager, float32 and float64") {
  manual_seed(1);
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = randn({1000}, dt);
    Tensor eager = ((x * 1.5f + 2).tanh().exp() - x.sigmoid()).relu() / (x * x + 1);
    check_close(chain8(x), eager, dt == kFloat32 ? 1e-5 : 1e-12, 1e-6);
  }
  Tensor m = randn({7, 33});
  check_close(softmax_rows(m), m.softmax(1), 1e-5, 1e-6);
}

TEST_CASE("retracing on a new signature, with reasons, and the bounded cache") {
  auto f = jit([](Tensor x) { return x.exp().sum(); }, "exp_sum");
  f(ones({4}));
  f(ones({4}));
  f(ones({8}));
  f(ones({8}, kFloat64));
  CHECK(f.stats().hits == 1);
  CHECK(f.stats().misses == 3);
  REQUIRE(f.stats().miss_reasons.size() == 3);
  CHECK(f.stats().miss_reasons[0] == "first call");
  CHECK(f.stats().miss_reasons[1] == "arg 0: shape [4] -> [8]");
  CHECK(f.stats().miss_reasons[2] == "arg 0: dtype f32 -> f64");
  f.set_cache_size(2);
  CHECK(f.stats().evictions == 1);
  f(ones({4}));  // evicted: traced again
  CHECK(f.stats().misses == 4);
  CHECK(f(ones({3})).item<float>() == doctest::Approx(3 * std::exp(1.f)));
}

TEST_CASE("numbers are constants: a new value retraces") {
  Tensor x = ones({3});
  CHECK(with_number(x, 2.0).sum().item<float>() == 6);
  CHECK(with_number(x, 3.0).sum().item<float>() == 9);
  CHECK(with_number.stats().miss_reasons.back().find("0.5") == std::string::npos);
  CHECK(with_number.stats().miss_reasons.back().find("2 -> 3") != std::string::npos);
}

TEST_CASE("captured tensors are parameters, read by reference") {
  Tensor x = ones({4});
  CHECK(scaled(x).to_vector<float>() == std::vector<float>{3, 4, 5, 6});
  g_scale.mul_(2);
  CHECK(scaled(x).to_vector<float>() == std::vector<float>{5, 7, 9, 11});
  std::string ir = print_graph(scaled.graph(x));
  CHECK(ir.find("param") != std::string::npos);
  CHECK(scaled.stats().misses == 1);
}

TEST_CASE("reading data inside a trace is an error naming the line") {
  std::string msg = test::error_of([] { reads_data(ones({2})); });
  CHECK(msg.find("item()") != std::string::npos);
  CHECK(msg.find("symbolic") != std::string::npos);
  CHECK(msg.find("jit_test.cpp:" + std::to_string(g_read_line)) != std::string::npos);
}

TEST_CASE("to(device) inside a trace: literals are built again there, other values are an error") {
  // A value made from creation ops alone moves: here from a (never run) GPU to the CPU.
  auto f = jit([](Tensor x) {
    return x + arange(3, TensorOptions().device(kCUDA)).to(kFloat32).cpu();
  });
  CHECK(equal(f(ones({3})), tensor({1.f, 2.f, 3.f})));
  // A graph runs on one device: an argument's value cannot move inside it.
  int line = 0;
  auto g = jit([&](Tensor x) {
    line = __LINE__ + 1;
    return x.to(Device(kCUDA));
  });
  std::string msg = test::error_of([&] { g(ones({2})); });
  CHECK(msg.find("to(cuda:0) inside a traced function") != std::string::npos);
  CHECK(msg.find("one device") != std::string::npos);
  CHECK(msg.find("jit_test.cpp:" + std::to_string(line)) != std::string::npos);
  // Nor a captured tensor with data: the call would read the copy made while tracing.
  Tensor c = ones({2});
  auto h = jit([&](Tensor x) { return x + c.to(Device(kCUDA)).cpu(); });
  msg = test::error_of([&] { h(ones({2})); });
  CHECK(msg.find("a tensor with data on cpu") != std::string::npos);
  CHECK(msg.find("before the call") != std::string::npos);
}

TEST_CASE("printing a symbolic tensor shows its type") {
  std::string seen;
  auto f = jit([&](Tensor x) {
    seen = (x * 2).str();
    return x * 2;
  });
  f(ones({2, 3}));
  CHECK(seen.find("symbolic f32[2,3]") != std::string::npos);
}

TEST_CASE("several outputs") {
  auto r = two_outputs(tensor({1.f, 2.f}), tensor({3.f, 4.f}));
  CHECK(r[0].to_vector<float>() == std::vector<float>{4, 6});
  CHECK(r[1].item<float>() == 11);
}

TEST_CASE("the eager switch runs the body directly") {
  auto f = jit([](Tensor x) { return x + 1; });
  set_jit_enabled(false);
  CHECK(f(ones({2})).to_vector<float>() == std::vector<float>{2, 2});
  set_jit_enabled(true);
  CHECK(f.stats().eager_calls == 1);
  CHECK(f.stats().misses == 0);
  f(ones({2}));
  CHECK(f.stats().misses == 1);
}

TEST_CASE("the two-layer net's forward, traced, equals eager") {
  manual_seed(3);
  Tensor x = randn({64, 1000});
  Tensor w1 = randn({1000, 100}), w2 = randn({100, 10});
  auto forward = jit([&](Tensor in) { return in.mm(w1).clamp_min(0).mm(w2); });
  check_close(forward(x), x.mm(w1).clamp_min(0).mm(w2), 1e-4, 1e-3);
  nn::Sequential mlp(nn::Linear(1000, 100), nn::ReLU(), nn::Linear(100, 10));
  auto net = jit([&](Tensor in) { return mlp(in); });
  NoGradGuard no_grad;
  check_close(net(x), mlp(x), 1e-4, 1e-4);
}

TEST_CASE("fusion on and off agree") {
  manual_seed(4);
  Tensor x = randn({64, 129});
  auto fused = jit([](Tensor t) { return (t - t.mean(1, true)) / (t.var({1}, false, true) + 1e-5).sqrt(); });
  auto unfused = jit([](Tensor t) { return (t - t.mean(1, true)) / (t.var({1}, false, true) + 1e-5).sqrt(); });
  unfused.set_fusion(false);
  check_close(fused(x), unfused(x), 1e-5, 1e-5);
  CHECK(unfused.stats().kernels > fused.stats().kernels);
}

TEST_CASE("KILN_CHECK compares with the reference on new signatures") {
  set_check_enabled(true);
  auto f = jit([](Tensor t) { return (t.exp() * 2).sum(0); });
  check_close(f(ones({5, 3})), full({3}, 10 * std::exp(1.f)), 1e-5);
  set_check_enabled(false);
}

// A traced training step under KILN_CHECK leaves exactly what an unchecked one
// leaves: the eager comparison run puts every tensor back as it was.
TEST_CASE("KILN_CHECK compares a whole training step and changes nothing") {
  auto make = [] {
    manual_seed(11);
    return nn::Sequential(nn::Linear(6, 5), nn::Tanh(), nn::Linear(5, 3));
  };
  nn::Sequential checked = make(), plain = make();
  optim::Adam opt_c(checked->parameters(), 0.05), opt_p(plain->parameters(), 0.05);
  manual_seed(12);
  Tensor x = randn({4, 6}), y = randn({4, 3});
  auto make_step = [](nn::Sequential& model, optim::Adam& opt) {
    return jit([&model, &opt](Tensor in, Tensor target) {
      opt.zero_grad();
      Tensor loss = nn::functional::mse_loss(model(in), target);
      loss.backward();
      opt.step();
      return loss;
    });
  };
  auto step_c = make_step(checked, opt_c), step_p = make_step(plain, opt_p);
  set_check_enabled(true);
  for (int i = 0; i < 3; ++i) check_close(step_c(x, y), step_p(x, y), 0, 0);
  set_check_enabled(false);
  auto pc = checked->parameters(), pp = plain->parameters();
  for (size_t i = 0; i < pc.size(); ++i) {
    check_close(pc[i], pp[i], 0, 0);
    check_close(pc[i].grad(), pp[i].grad(), 0, 0);
  }
}

// KILN_CHECK's eager run throws (only that run: the trace ran the body first):
// the error reaches the caller, and what the run wrote before it is put back.
TEST_CASE("KILN_CHECK puts the state back when its eager run throws") {
  Tensor w = ones({3});
  int runs = 0;
  auto f = jit([&](Tensor x) {
    w.add_(x);
    if (++runs == 2) throw std::runtime_error("the eager run fails");
    return w * 2;
  });
  set_check_enabled(true);
  CHECK_THROWS_WITH(f(ones({3})), "the eager run fails");
  set_check_enabled(false);
  CHECK(runs == 2);
  check_close(w, ones({3}), 0, 0);
}

// A host value the trace baked in: eager mode and the plan update the weight
// differently, and KILN_CHECK names the update and the line that recorded it.
TEST_CASE("KILN_CHECK catches a parameter update that differs from eager mode") {
  Tensor w = ones({3}, kFloat64).requires_grad_(true);
  int calls = 0;
  auto step = jit([&](Tensor x) {
    Tensor loss = (w * x).sum();
    loss.backward();
    ++calls;
    NoGradGuard no_grad;
    w.sub_(w.grad() * (0.1 * calls));  // a host value: the trace keeps its first one
    return loss;
  });
  set_check_enabled(true);
  KILN_CHECK_ERROR(step(ones({3}, kFloat64)), "KILN_CHECK: after a call of", "captured tensor 0",
                   "traced 0.9, eager 0.8", "computed by kernel", "jit_test.cpp");
  set_check_enabled(false);
}

struct HostScaledGrad : autograd::Function<HostScaledGrad> {
  static inline int backward_calls = 0;
  static Tensor forward(autograd::Context*, Tensor x) { return x * 1.0; }
  static std::vector<Tensor> backward(autograd::Context*, std::vector<Tensor> g) {
    ++backward_calls;  // a host value: the traced backward keeps its first one
    return {g[0] * static_cast<double>(backward_calls)};
  }
};

// Traced forward, eager backward: KILN_CHECK compares the gradients the plan's
// backward gives with eager mode's, for the same output gradients.
TEST_CASE("KILN_CHECK compares the gradients of a traced forward") {
  auto f = jit([](Tensor x) { return HostScaledGrad::apply(x).exp(); });
  Tensor x = ones({4}, kFloat64).requires_grad_(true);
  set_check_enabled(true);
  KILN_CHECK_ERROR(f(x), "KILN_CHECK", "the gradient w.r.t. argument 0", "differs");
  set_check_enabled(false);
  auto g = jit([](Tensor x) { return (x.exp() * x).sum(); });
  set_check_enabled(true);
  Tensor y = g(x);  // the same gradients both ways: no error, and backward still works after
  set_check_enabled(false);
  y.backward();
  check_close(x.grad(), (x.exp() * x + x.exp()).detach(), 1e-12);
}

TEST_CASE("the dump shows the partition of a call whose outputs require grad") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_partition_dump_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto f = jit([](Tensor x) { return (x.exp() * x).sum(); }, "partitioned");
  f.dump(dir.string(), ones({4}).requires_grad_(true));
  const fs::path sig = dir / "partitioned" / "f32-4";
  // As traced: the forward alone, one output.
  CHECK(parse_graph(read_file(sig / "00_traced.kir"), "00_traced.kir").outputs.size() == 1);
  const std::string text = read_file(sig / "01_partition.kir");
  CHECK(text.find("// pass partition: changed") == 0);
  CHECK(text.find("// the forward returns 1 outputs, then ") != std::string::npos);
  CHECK(text.find("// backward: ") != std::string::npos);
  CHECK(text.find("the gradients of arg 0\n//   %0 = arg {index=0} : f32[4]") != std::string::npos);
  // The file parses as the forward (the backward is comments): the output, then what it saves.
  const Graph forward = parse_graph(text, "01_partition.kir");
  CHECK(forward.outputs.size() > 1);
  CHECK(fs::exists(sig / "02_simplify.kir"));
  fs::remove_all(dir);
}

TEST_CASE("dumps hold every stage and vectorized kernels") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_dump_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  chain8.dump(dir.string(), ones({1 << 16}));
  fs::path sig = dir / "chain8" / "f32-65536";
  REQUIRE(fs::exists(sig / "summary.txt"));
  CHECK(fs::exists(sig / "00_traced.kir"));
  // The partition, the pipeline's passes, then the schedule's steps, numbered in order.
  CHECK(read_file(sig / "01_partition.kir").find("// pass partition: unchanged") == 0);
  CHECK(fs::exists(sig / "02_simplify.kir"));
  CHECK(fs::exists(sig / "09_fusion.txt"));
  CHECK(fs::exists(sig / "10_fold_transposes.txt"));
  CHECK(fs::exists(sig / "11_collectives.txt"));
  CHECK(fs::exists(sig / "12_memory.txt"));
  CHECK(fs::exists(sig / "13_lower.txt"));
  CHECK(fs::exists(sig / "14_in_place.txt"));
  CHECK(fs::exists(sig / "15_accumulate.txt"));
  CHECK(read_file(sig / "09_fusion.txt").find("// schedule step fusion") == 0);
  std::string summary = read_file(sig / "summary.txt");
  CHECK(summary.find("jit_test.cpp") != std::string::npos);
  bool vector_asm = false, vector_ir = false;
  int kernels = 0;
  for (auto& entry : fs::directory_iterator(sig / "kernels")) {
    std::string text = read_file(entry.path());
    if (entry.path().extension() == ".s") {
      ++kernels;
      vector_asm = vector_asm || text.find("%zmm") != std::string::npos || text.find("%ymm") != std::string::npos;
      CHECK(text.find("expf") == std::string::npos);
    }
    if (entry.path().string().ends_with(".opt.ll"))
      vector_ir = vector_ir || text.find("x float>") != std::string::npos;
  }
  CHECK(kernels == 1);  // the whole chain is one fused kernel
  CHECK(vector_asm);
  CHECK(vector_ir);
  fs::remove_all(dir);
}

TEST_CASE("constant data written in a traced function compiles") {
  auto f = jit([](Tensor x) { return x * tensor({1.f, 2.f, 3.f}) + arange(3).to(kFloat32); });
  CHECK(f(ones({2, 3})).to_vector<float>() == std::vector<float>{1, 3, 5, 1, 3, 5});
}

// Run as a child process by the next test (skipped in normal runs).
TEST_CASE("disk cache child" * doctest::skip()) {
  auto f = jit([](Tensor x) { return (x.exp() * 3 + 1).softmax(1).sum(0); }, "disk_cache_child");
  f(ones({16, 33}));
  std::printf("kernels=%lld from_disk=%lld\n", static_cast<long long>(f.stats().kernels),
              static_cast<long long>(f.stats().kernels_from_disk));
  // No wait: the process's exit runs the background compiles of the optimised
  // kernels to the end (compile_queue.h), so they are on disk for the next one.
}

TEST_CASE("a second process compiles nothing: kernels come from the disk cache") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_cache_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string cmd = "KILN_TIER=tiered KILN_CACHE_DIR=" + dir.string() + " " + KILN_BINARY_DIR +
                    "/tests/test_frontend --no-skip -tc='disk cache child' 2>&1";
  auto run = [&] {
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    std::string out;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    CHECK(pclose(p) == 0);
    long long kernels = -1, from_disk = -1;
    auto at = out.find("kernels=");
    REQUIRE_MESSAGE(at != std::string::npos, out);
    std::sscanf(out.c_str() + at, "kernels=%lld from_disk=%lld", &kernels, &from_disk);
    return std::make_pair(kernels, from_disk);
  };
  auto first = run();
  auto second = run();
  CHECK(first.first > 0);
  CHECK(first.second == 0);
  CHECK(second.second == second.first);
  fs::remove_all(dir);
}

TEST_CASE("the backward of a traced call compiles on first use, with eager's gradients") {
  manual_seed(1);
  Tensor w = randn({4, 3}).requires_grad_();
  Tensor x = randn({5, 4});
  auto f = jit([&](Tensor in) { return (in.mm(w).tanh() * 2).sum(); }, "lazy_backward");
  Tensor loss = f(x);
  const int64_t forward_kernels = f.stats().kernels;
  CHECK(forward_kernels > 0);
  CHECK(w.grad().defined() == false);
  loss.backward();  // compiles the backward plan now
  CHECK(f.stats().kernels > forward_kernels);
  Tensor traced_grad = w.grad().clone();
  w.grad().zero_();
  (x.mm(w).tanh() * 2).sum().backward();
  check_close(traced_grad, w.grad(), 1e-5);
  // The next call of the same signature reuses both plans.
  w.grad().zero_();
  const int64_t both = f.stats().kernels;
  f(x).backward();
  CHECK(f.stats().kernels == both);
  check_close(traced_grad, w.grad(), 1e-5);
}

TEST_CASE("a new batch size shares the kernels that do not depend on it; stats show compile times") {
  manual_seed(2);
  nn::Sequential model(nn::Linear(8, 6), nn::ReLU(), nn::Linear(6, 3));
  optim::Adam opt(model->parameters(), 1e-2);
  auto step = jit(
      [&](Tensor in, Tensor target) {
        opt.zero_grad();
        Tensor loss = nn::functional::cross_entropy(model(in), target);
        loss.backward();
        opt.step();
        return loss;
      },
      "reuse_step");
  step(randn({7, 8}), (rand({7}) * 3).to(kInt64));
  const int64_t reused_first = step.stats().kernels_reused;
  REQUIRE_FALSE(step.stats().kernel_compile_ms.empty());
  for (const auto& k : step.stats().kernel_compile_ms) CHECK(k.ms > 0);
  step(randn({5, 8}), (rand({5}) * 3).to(kInt64));
  wait_for_background_compiles();  // size 5 compiles there: the batch just became dynamic
  CHECK(step.stats().misses == 2);
  CHECK(step.stats().kernels_reused > reused_first);  // Adam's updates of each parameter
  const std::string s = step.stats().str();
  CHECK(s.find("reused") != std::string::npos);
  CHECK(s.find("CPU kernels: ") != std::string::npos);
  CHECK(s.find("machine code") != std::string::npos);
}

// BLAS must not accumulate into a matrix it reads: w -= 0.5 * (w @ x) keeps the
// epilogue's copy (or in-place epilogue), never one accumulating call into w.
TEST_CASE("an update that reads its parameter through a matmul matches eager") {
  manual_seed(3);
  // Large enough that BLAS works in blocks (an aliased call goes wrong there).
  Tensor x = randn({384, 384}, TensorOptions().dtype(kFloat64)) * 0.05;
  Tensor w_eager = randn({384, 384}, TensorOptions().dtype(kFloat64));
  Tensor w_traced = w_eager.clone();
  auto step = [](Tensor& w, const Tensor& x) {
    NoGradGuard no_grad;
    w.sub_(w.matmul(x) * 0.5);
  };
  auto f = jit([&](Tensor x) {
    step(w_traced, x);
    return w_traced.sum();
  });
  for (int i = 0; i < 3; ++i) {
    step(w_eager, x);
    f(x);
  }
  CHECK(allclose(w_traced, w_eager, 1e-10, 1e-10));
}

TEST_CASE("a gradient equal to a value the traced function computed is saved for the backward") {
  // floor's and sign's gradients are zeros, so a's is 0 + 0: the node the
  // backward() inside the function already built. The gradient the plan's own
  // backward returns is then a forward value, which must be saved for it
  // (found by kiln-fuzz, seed 1, program 1859).
  auto body = [](Tensor a) -> std::vector<Tensor> {
    Tensor v1 = a.floor(), v2 = a.sign();
    Tensor loss = v2.sum() + v1.sum();
    loss.backward();
    return {v1, loss};
  };
  auto traced = jit(body);
  Tensor ae = from_vector({1.75}, {}, TensorOptions(kFloat64).requires_grad(true));
  Tensor at = from_vector({1.75}, {}, TensorOptions(kFloat64).requires_grad(true));
  std::vector<Tensor> e = body(ae), t = traced(at);
  CHECK(equal(e[1], t[1]));
  CHECK(at.grad().item<double>() == 0.0);
  CHECK(ae.grad().item<double>() == 0.0);
}
