// Dynamic sizes: a traced function whose batch size changes (or is marked
// dynamic) retraces at a new size but compiles no kernel: its CPU kernels are
// templates taking the sizes at run time. Traced still equals eager at every size.
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "codegen/compile_queue.h"
#include "frontend/settings.h"
#include "runtime/llvm_jit.h"

using namespace kiln;
using kiln::test::check_close;

namespace {

// Captures std::cerr (where KILN_LOG writes) while alive.
struct CerrCapture {
  std::ostringstream text;
  std::streambuf* saved = std::cerr.rdbuf(text.rdbuf());
  ~CerrCapture() { std::cerr.rdbuf(saved); }
};

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The MLP step of the dynamic tests: traced, and an eager twin from the same seed.
struct TwinSteps {
  static nn::Sequential make() {
    manual_seed(3);
    return nn::Sequential(nn::Linear(12, 16), nn::Tanh(), nn::Linear(16, 5));
  }
  static Tensor train(nn::Sequential& m, optim::Adam& opt, const Tensor& in, const Tensor& target) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(m(in), target);
    loss.backward();
    opt.step();
    return loss;
  }
  // One call at batch size n both ways: the same loss, parameters and gradients.
  void call(int64_t n) {
    CAPTURE(n);
    Tensor in = randn({n, 12}), target = (rand({n}) * 5).to(kInt64);
    Tensor traced_loss = step(in, target);
    Tensor eager_loss = train(eager_model, eager_opt, in, target);
    check_close(traced_loss, eager_loss, 1e-5);
    auto tp = traced_model->parameters(), ep = eager_model->parameters();
    for (size_t i = 0; i < tp.size(); ++i) {
      check_close(tp[i], ep[i], 1e-5, 1e-6);
      check_close(tp[i].grad(), ep[i].grad(), 1e-5, 1e-6);
    }
  }
  nn::Sequential traced_model = make(), eager_model = make();
  optim::Adam traced_opt{traced_model->parameters(), 1e-2}, eager_opt{eager_model->parameters(), 1e-2};
  Traced<Tensor(Tensor, Tensor)> step =
      jit([this](Tensor in, Tensor target) { return train(traced_model, traced_opt, in, target); },
          "dynamic_step");
};

void sizes_become_dynamic(bool background) {
  Settings saved = settings();
  settings().background_compile = background;
  TwinSteps twins;
  CerrCapture cerr;
  test::ScopedValue log(settings().log, std::string("recompiles"));
  size_t objects_before = 0;
  int call = 0;
  // After the loop, sizes seen before: their plans, compiled in the background or not, run.
  for (int64_t n : {64, 50, 37, 128, 50, -1, 37, 50, 64}) {
    if (n < 0) {
      wait_for_background_compiles();
      continue;
    }
    if (call == 2) {
      wait_for_background_compiles();  // size 50's templates
      objects_before = LlvmJit::get().loaded_objects();
    }
    twins.call(n);
    ++call;
  }
  settings() = saved;
  const auto& step = twins.step;
  // Sizes 37 and 128 lowered their kernels and ran the templates made at 50.
  CHECK(LlvmJit::get().loaded_objects() == objects_before);
  const TraceStats& s = step.stats();
  // Every later size found its plan (also the one traced before the eager call
  // at 50), but 64 retraced once: its first trace saw no .grad yet.
  CHECK(s.misses == 5);
  CHECK(s.miss_reasons.back() == "a captured tensor's .grad changed (undefined -> defined)");
  // Only size 50 compiled in the background: its templates were ready for 37.
  CHECK(s.background_compiles == (background ? 1 : 0));
  CHECK(has(s.dynamic_dims, "arg 0 dim 0"));
  CHECK(has(s.dynamic_dims, "arg 1 dim 0"));
  CHECK(s.kernels_templated > 0);
  CHECK(s.str().find("dynamic: arg 0 dim 0") != std::string::npos);
  const std::string logged = cerr.text.str();
  CAPTURE(logged);
  CHECK(logged.find("'dynamic_step': arg 0 dim 0 is now dynamic (64 -> 50)") != std::string::npos);
  CHECK(logged.find("arg 1 dim 0 is now dynamic") != std::string::npos);
  CHECK((logged.find("in the background") != std::string::npos) == background);
}

}  // namespace

TEST_CASE("a batch size that changes becomes dynamic: later sizes compile no kernel, traced equals eager") {
  SUBCASE("compiled before the call returns") { sizes_become_dynamic(false); }
  SUBCASE("compiled in the background, the call running eagerly") { sizes_become_dynamic(true); }
}

// KILN_COMPILE_AFTER=1 (the default outside the tests): a size's first call runs
// the body eagerly, untraced; its second compiles (in the background, running
// eagerly meanwhile), and then its plan runs. Traced equals eager throughout.
TEST_CASE("a new size runs eagerly untraced at its first call and compiles at its second") {
  Settings saved = settings();
  settings().compile_after = 1;
  settings().background_compile = true;
  wait_for_background_compiles();
  TwinSteps twins;
  CerrCapture cerr;
  test::ScopedValue log(settings().log, std::string("recompiles"));
  for (int64_t n : {64, 50, 37, 50})  // 50, 37: eagerly; 50 again: compiles the templates
    twins.call(n);
  const TraceStats& s = twins.step.stats();
  CHECK(s.calls_before_compiling == 2);
  CHECK(s.background_compiles == 1);
  CHECK(has(s.dynamic_dims, "arg 0 dim 0"));
  wait_for_background_compiles();
  // With the templates made, a new size compiles at its first call (no kernel, before
  // it returns): it would not run eagerly while compiling.
  const int64_t misses = s.misses;
  for (int64_t n : {128, 37, 50, 64, 128}) twins.call(n);
  settings() = saved;
  CHECK(s.calls_before_compiling == 2);
  CHECK(s.background_compiles == 1);
  CHECK(s.misses == misses + 3);  // 128, 37, and 64 (its first trace saw no .grad yet)
  CHECK(s.str().find("2 calls at new sizes ran eagerly before compiling") != std::string::npos);
  const std::string logged = cerr.text.str();
  CAPTURE(logged);
  CHECK(logged.find("'dynamic_step' (arg 0: shape [64,12] -> [50,12]) runs eagerly: a new size "
                    "compiles when it comes 2 times (KILN_COMPILE_AFTER)") != std::string::npos);
}

TEST_CASE("a new size runs eagerly while its plan compiles in the background, then runs the plan") {
  Settings saved = settings();
  settings().background_compile = true;
  settings().reuse_kernels = false;  // every kernel here compiles for this test
  wait_for_background_compiles();  // nothing of other tests' still loading kernels
  // Holds the background thread, so that the compiles queue behind it.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  post_background_compile([released] { released.wait(); });
  auto eager = [](const Tensor& x) { return (x * 3 - 1).exp().sum(0); };
  auto f = jit([&](Tensor x) { return eager(x); }, "tiered");
  CerrCapture cerr;
  test::ScopedValue log(settings().log, std::string("recompiles"));
  Tensor x9 = randn({9, 3}), x7 = randn({7, 3}), x5 = randn({5, 3});
  check_close(f(x9), eager(x9), 1e-5);  // the first call compiles before it returns
  const size_t objects = LlvmJit::get().loaded_objects();
  for (const Tensor& x : {x7, x7, x5}) check_close(f(x), eager(x), 1e-5);
  {
    const TraceStats& s = f.stats();
    CHECK(s.misses == 3);
    CHECK(s.hits == 1);  // the second call at 7 found the entry still compiling
    CHECK(s.background_compiles == 2);  // 5 came while 7 still compiled
    CHECK(s.calls_while_compiling == 3);
    CHECK(LlvmJit::get().loaded_objects() == objects);
  }
  release.set_value();
  wait_for_background_compiles();
  CHECK(LlvmJit::get().loaded_objects() > objects);  // the templates
  const size_t compiled = LlvmJit::get().loaded_objects();
  for (const Tensor& x : {x7, x5, x9}) check_close(f(x), eager(x), 1e-5);
  settings() = saved;
  const TraceStats& s = f.stats();
  CHECK(s.hits == 4);
  CHECK(s.calls_while_compiling == 3);  // the plans ran
  CHECK(LlvmJit::get().loaded_objects() == compiled);
  CHECK(s.str().find("background compiles 2 (3 calls ran eagerly meanwhile)") != std::string::npos);
  const std::string logged = cerr.text.str();
  CAPTURE(logged);
  CHECK(logged.find("arg 0: shape [9,3] -> [7,3]) in the background; until it is ready, its calls run eagerly") !=
        std::string::npos);
}

TEST_CASE("the background queue runs the plans calls wait for before the tier-up compiles") {
  wait_for_background_compiles();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  post_background_compile([released] { released.wait(); });  // busy until released
  std::mutex mu;
  std::string order;
  auto record = [&](const char* what) {
    return [&, what] {
      std::lock_guard<std::mutex> lock(mu);
      order += what;
    };
  };
  post_background_compile(record("i1 "), CompileUrgency::Improvement);
  post_background_compile(record("n1 "), CompileUrgency::Needed);
  post_background_compile(record("i2 "), CompileUrgency::Improvement);
  post_background_compile(record("n2 "), CompileUrgency::Needed);
  release.set_value();
  wait_for_background_compiles();
  CHECK(order == "n1 n2 i1 i2 ");
}

// Tier-ups wait while a call runs eagerly, but not for a thread that waits for
// the queue from inside such a call (it would wait for itself).
TEST_CASE("waiting for the background queue inside an eager call does not wait for itself") {
  wait_for_background_compiles();
  auto ran = std::make_shared<std::atomic<bool>>(false);
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  // Detached: if it hung, the test fails rather than hangs (at exit the queue
  // stops waiting for eager calls, so the thread's wait ends then).
  std::thread([ran, done] {
    const EagerCallScope eager_call;
    post_background_compile([ran] { *ran = true; }, CompileUrgency::Improvement);
    wait_for_background_compiles();
    done->set_value();
  }).detach();
  REQUIRE(finished.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  CHECK(ran->load());
}

// A child forked while the compile thread works has the queue's state but not
// its thread: what it posts is dropped and a wait returns. (It ends with _exit:
// after a fork in a threaded process only that is safe, and other statics of
// this test binary would join threads the child does not have.)
TEST_CASE("a child forked while the background thread compiles neither waits for it nor hangs") {
  wait_for_background_compiles();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  post_background_compile([released] { released.wait(); });  // busy until released
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    post_background_compile([] {});  // dropped
    wait_for_background_compiles();   // returns: nothing of the child's is queued
    ::_exit(0);
  }
  int status = -1;
  pid_t done = 0;
  for (int i = 0; i < 200 && done == 0; ++i) {  // up to 20 s
    done = ::waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) ::kill(child, SIGKILL), ::waitpid(child, &status, 0);
  release.set_value();
  wait_for_background_compiles();
  CHECK_MESSAGE(done == child, "the forked child hung at exit");
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a new size whose templates exist (mark_dynamic) compiles before the call returns") {
  auto f = jit([](Tensor x) { return (x * 3 - 1).exp().sum(0); }, "not_background");
  f.mark_dynamic(0, 0);  // the first compile makes the templates
  for (int64_t n : {9, 7, 5}) f(randn({n, 3}));
  CHECK(f.stats().background_compiles == 0);
  CHECK(f.stats().calls_while_compiling == 0);
}

TEST_CASE("mark_dynamic: the first compile already makes templates; new sizes compile nothing") {
  Tensor w = randn({24, 10}), b = randn({10});
  auto eager = [&](const Tensor& x) { return ((x.matmul(w) + b).softmax(1) * x.sum(1, true)).mean(0); };
  auto f = jit([&](Tensor x) { return eager(x); }, "marked");
  f.mark_dynamic(0, 0);
  Tensor x0 = randn({64, 24});
  check_close(f(x0), eager(x0), 1e-5, 1e-6);
  CHECK(f.stats().kernels_templated > 0);
  CHECK(has(f.stats().dynamic_dims, "arg 0 dim 0"));
  // The count is the process's: tier-ups still compiling (this function's, or
  // an earlier test's) land first.
  wait_for_background_compiles();
  const size_t objects = LlvmJit::get().loaded_objects();
  for (int64_t n : {50, 37, 1}) {
    CAPTURE(n);
    Tensor x = randn({n, 24});
    check_close(f(x), eager(x), 1e-5, 1e-6);
    if (n != 1) CHECK(LlvmJit::get().loaded_objects() == objects);  // size 1 may lower differently
  }
  CHECK(f.stats().misses == 4);
}

TEST_CASE("mark_dynamic names a tensor argument and one of its dims") {
  auto f = jit([](Tensor x, double s) { return x * s; }, "marked_badly");
  KILN_CHECK_ERROR(f.mark_dynamic(1, 0), "mark_dynamic(arg 1, dim 0)", "expected the position of a tensor argument");
  KILN_CHECK_ERROR(f.mark_dynamic(2, 0), "mark_dynamic(arg 2, dim 0)", "takes 2 arguments");
  f.mark_dynamic(0, 2);
  KILN_CHECK_ERROR(f(randn({3, 4}), 2.0), "mark_dynamic(arg 0, dim 2) does not fit this call",
                   "f32[3,4]");
  auto g = jit([](Tensor x) { return x * 2; }, "marked_negative");
  g.mark_dynamic(0, -1);
  Tensor x = randn({3, 4});
  check_close(g(x), x * 2);
  Tensor y = randn({3, 6});
  check_close(g(y), y * 2);
  CHECK(has(g.stats().dynamic_dims, "arg 0 dim -1"));
}

TEST_CASE("KILN_DYNAMIC=0: a changing size stays static, every size compiles its own kernels") {
  Settings saved = settings();
  settings().auto_dynamic = false;
  auto f = jit([](Tensor x) { return (x * 3 - 1).exp().sum(0); }, "stays_static");
  for (int64_t n : {9, 7, 5}) {
    Tensor x = randn({n, 3});
    check_close(f(x), (x * 3 - 1).exp().sum(0), 1e-5);
  }
  settings() = saved;
  CHECK(f.stats().dynamic_dims.empty());
  CHECK(f.stats().kernels_templated == 0);
  CHECK(f.stats().misses == 3);
}

TEST_CASE("mark_dynamic on two dims of one tensor: both take any size") {
  auto f = jit([](Tensor x) { return (x.tanh() * 2).sum(1); }, "two_dims");
  f.mark_dynamic(0, 0);
  f.mark_dynamic(0, 1);
  Tensor x0 = randn({8, 6});
  check_close(f(x0), (x0.tanh() * 2).sum(1), 1e-5, 1e-5);
  CHECK(f.stats().kernels_templated > 0);
  const size_t objects = LlvmJit::get().loaded_objects();
  for (Shape s : {Shape{5, 9}, Shape{11, 3}}) {
    Tensor x = randn(s);
    check_close(f(x), (x.tanh() * 2).sum(1), 1e-5, 1e-5);
  }
  CHECK(LlvmJit::get().loaded_objects() == objects);
}

TEST_CASE("kernels of one plan that differ only in sizes share a template: fewer compiled, values as eager") {
  namespace F = nn::functional;
  // Adam over four parameters of four shapes: four update kernels alike but for
  // their buffers' shapes, which the shared template takes at run time.
  struct Run {
    std::vector<Tensor> losses, params;
    TraceStats stats;
    size_t objects = 0;  // objects loaded by the first call
  };
  auto run = [](int jit_mode, bool share) {
    Settings saved = settings();
    settings().jit = jit_mode != 0;
    settings().share_sizes = share;
    settings().reuse_kernels = false;  // nothing from other tests' kernels
    // The objects a first call loads, counted: no tier-up compile of this run's
    // kernels or an earlier one's may load its object in the background meanwhile.
    settings().tier = CodeTier::Optimised;
    wait_for_background_compiles();
    // Steps as compiled: merged, the updates sharing a template would be one
    // foreach step, and the two plans' step counts would differ.
    settings().merge_steps = false;
    manual_seed(5);
    nn::Sequential model(nn::Linear(9, 7), nn::Tanh(), nn::Linear(7, 4));
    optim::Adam opt(model->parameters(), 1e-2);
    auto step = jit(
        [&](Tensor in, Tensor target) {
          opt.zero_grad();
          Tensor loss = F::cross_entropy(model(in), target);
          loss.backward();
          opt.step();
          return loss;
        },
        "shared_sizes");
    Tensor x = randn({6, 9}), y = (rand({6}) * 4).to(kInt64);
    Run r;
    for (int i = 0; i < 3; ++i) {
      const size_t before = LlvmJit::get().loaded_objects();
      r.losses.push_back(step(x, y));
      if (i == 0) r.objects = LlvmJit::get().loaded_objects() - before;
    }
    r.params = model->parameters();
    r.stats = step.stats();
    settings() = saved;
    return r;
  };
  const Run eager = run(0, true), shared = run(1, true), own = run(1, false);
  for (const Run* r : {&shared, &own}) {
    for (size_t i = 0; i < eager.losses.size(); ++i) check_close(r->losses[i], eager.losses[i], 1e-5, 1e-6);
    for (size_t i = 0; i < eager.params.size(); ++i) check_close(r->params[i], eager.params[i], 1e-5, 1e-6);
  }
  CHECK(eager.stats.eager_calls == 3);
  CHECK(shared.stats.kernels_templated >= 2);
  CHECK(shared.stats.kernels_reused >= 1);
  CHECK(own.stats.kernels_templated == 0);
  CHECK(own.stats.kernels_reused == 0);
  CHECK(shared.stats.kernels == own.stats.kernels);  // the same plan
  CHECK(shared.objects < own.objects);
}
