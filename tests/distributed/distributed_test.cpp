// Data parallelism (kiln::distributed). CTest runs this suite twice: alone (a
// world of one) and under `mpirun -np 2` (tests/CMakeLists.txt), where every
// rank runs every case in the same order, as collectives need. The failure
// cases are in failure_test.cpp.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "frontend/kiln/kiln.h"
#include "frontend/settings.h"
#include "runtime/collective.h"

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

void ensure_init() {
  if (!dist::is_initialized()) dist::init();
}

// A two-layer net with parameters of one dtype, initialised from manual_seed.
struct Net : nn::Module {
  Tensor w1, b1, w2, b2;
  explicit Net(DType dt) : nn::Module("Net") {
    manual_seed(0);
    TensorOptions o = TensorOptions(dt);
    w1 = register_parameter("w1", randn({16, 8}, o) * 0.3);
    b1 = register_parameter("b1", randn({16}, o) * 0.1);
    w2 = register_parameter("w2", randn({4, 16}, o) * 0.3);
    b2 = register_parameter("b2", randn({4}, o) * 0.1);
  }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    Tensor h = (x.matmul(w1.t()) + b1).tanh();
    return (h.matmul(w2.t()) + b2 - y).pow(2).mean();
  }
};

struct Data {
  Tensor x, y;  // the global batch
};
Data global_batch(DType dt, int64_t n) {
  manual_seed(1);
  return {randn({n, 8}, TensorOptions(dt)), randn({n, 4}, TensorOptions(dt))};
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a.to(kDouble) - b.to(kDouble)).abs().max().item<double>();
}

// Trains `steps` Adam steps: one process on the whole batch (ref), or this
// rank's share with DistributedDataParallel, eagerly or as one traced step.
std::vector<Tensor> train(DType dt, int steps, bool data_parallel, bool traced, std::vector<double>* losses) {
  const int world = dist::world_size(), r = dist::rank();
  const int64_t per_rank = 6;
  Data d = global_batch(dt, per_rank * world);
  Tensor x = d.x, y = d.y;
  if (data_parallel) {
    x = d.x.narrow(0, r * per_rank, per_rank).contiguous();
    y = d.y.narrow(0, r * per_rank, per_rank).contiguous();
  }
  auto net = std::make_shared<Net>(dt);
  optim::Adam opt(net->parameters(), optim::AdamOptions(0.01));
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  dist::DDPOptions o;
  o.bucket_cap_mb = 300.0 / (1024 * 1024);  // about 300 bytes: several buckets
  if (data_parallel) ddp = std::make_unique<dist::DistributedDataParallel>(net, o);
  auto step_fn = [&](Tensor xb, Tensor yb) {
    opt.zero_grad();
    Tensor l = net->loss(xb, yb);
    l.backward();
    opt.step();
    return l;
  };
  auto traced_step = jit(step_fn, "ddp_step");
  for (int s = 0; s < steps; ++s) {
    Tensor l = traced ? traced_step(x, y) : step_fn(x, y);
    if (data_parallel) dist::all_reduce(l, ReduceOp::avg);
    losses->push_back(l.item<double>());
  }
  return net->parameters();
}

}  // namespace

TEST_CASE("collectives give every rank the same values, eagerly and traced") {
  ensure_init();
  const int world = dist::world_size(), r = dist::rank();
  CAPTURE(r);
  Tensor t = full({3}, double(r + 1), TensorOptions(kDouble));
  dist::all_reduce(t);
  CHECK(t[0].item<double>() == doctest::Approx(world * (world + 1) / 2.0));
  Tensor m = full({2}, float(r), TensorOptions(kFloat));
  dist::all_reduce(m, ReduceOp::max);
  CHECK(m[1].item<float>() == float(world - 1));
  Tensor a = full({2}, float(r), TensorOptions(kFloat));
  dist::all_reduce(a, ReduceOp::avg);
  CHECK(a[0].item<float>() == doctest::Approx((world - 1) / 2.0));
  Tensor b = full({2, 2}, int64_t(r * 10), TensorOptions(kLong));
  dist::broadcast(b, world - 1);
  CHECK(b[1][1].item<int64_t>() == (world - 1) * 10);
  Tensor g = dist::all_gather(full({2}, float(r)));
  REQUIRE(g.sizes() == Shape{2 * world});
  for (int k = 0; k < world; ++k) CHECK(g[2 * k + 1].item<float>() == float(k));
  Tensor s = dist::reduce_scatter(arange(2 * world, TensorOptions(kFloat)));
  REQUIRE(s.sizes() == Shape{2});
  CHECK(s[0].item<float>() == float(2 * r * world));

  // The same calls inside a trace are graph nodes with the same results.
  auto f = jit([&](Tensor x) {
    Tensor y = x * 2;
    dist::all_reduce(y, ReduceOp::sum);
    Tensor z = dist::all_gather(y + 1);
    return dist::reduce_scatter(z, ReduceOp::avg) - 1;
  });
  Tensor x = full({world * 2}, double(r), TensorOptions(kDouble));
  Tensor eager;
  {
    Tensor y = x * 2;
    dist::all_reduce(y, ReduceOp::sum);
    eager = dist::reduce_scatter(dist::all_gather(y + 1), ReduceOp::avg) - 1;
  }
  Tensor traced = f(x);
  CHECK(max_abs_diff(eager, traced) == 0);
  std::ostringstream graph;
  graph << f.graph(x);
  const std::string text = graph.str();
  CHECK(text.find("all_reduce") != std::string::npos);
  CHECK(text.find("reduce_scatter") != std::string::npos);
}

TEST_CASE("collectives refuse what they cannot do, naming the op and line") {
  ensure_init();
  Tensor flags = full({2}, true, TensorOptions(kBool));
  CHECK_THROWS_WITH_AS(dist::all_reduce(flags), doctest::Contains("expected a numeric tensor, got bool"), Error);
  Tensor ints = full({2}, int64_t(1), TensorOptions(kLong));
  CHECK_THROWS_WITH_AS(dist::all_reduce(ints, ReduceOp::avg), doctest::Contains("distributed_test.cpp"), Error);
  CHECK_THROWS_WITH_AS(dist::broadcast(ints, dist::world_size()), doctest::Contains("expected a root rank"), Error);
  CHECK_THROWS_WITH_AS(dist::init(), doctest::Contains("already initialised"), Error);
}

TEST_CASE("data parallel training equals one process on the whole batch (f64, eager and traced)") {
  ensure_init();
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    std::vector<double> ref_loss, dp_loss;
    std::vector<Tensor> ref = train(kDouble, 20, false, false, &ref_loss);
    std::vector<Tensor> dp = train(kDouble, 20, true, traced, &dp_loss);
    REQUIRE(ref.size() == dp.size());
    for (size_t i = 0; i < ref.size(); ++i) CHECK(max_abs_diff(ref[i], dp[i]) < 1e-12);
    for (size_t s = 0; s < ref_loss.size(); ++s) CHECK(dp_loss[s] == doctest::Approx(ref_loss[s]).epsilon(1e-12));
    CHECK(dp_loss.back() < dp_loss.front());
  }
}

TEST_CASE("data parallel training equals one process on the whole batch (f32, 50 steps)") {
  ensure_init();
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    std::vector<double> ref_loss, dp_loss;
    std::vector<Tensor> ref = train(kFloat, 50, false, false, &ref_loss);
    std::vector<Tensor> dp = train(kFloat, 50, true, traced, &dp_loss);
    for (size_t i = 0; i < ref.size(); ++i) CHECK(max_abs_diff(ref[i], dp[i]) < 1e-4);
    CHECK(dp_loss.back() == doctest::Approx(ref_loss.back()).epsilon(1e-4));
  }
}

TEST_CASE("a traced data-parallel step at new batch sizes: every rank the same collectives") {
  ensure_init();
  const int world = dist::world_size(), r = dist::rank();
  REQUIRE(settings().background_compile);  // the default: new sizes may compile in the background
  // Per-rank batches of 6, 5, 4, 3 rows: dim 0 becomes dynamic, and the later
  // sizes are new. Eagerly each parameter is one all_reduce; a plan packs them
  // into buckets, so a rank running the body eagerly while its compile is
  // pending would meet another rank's plan with other collectives.
  const std::vector<int64_t> sizes = {6, 5, 4, 3};
  Data d = global_batch(kDouble, 6 * world);
  auto run = [&](bool traced) {
    auto net = std::make_shared<Net>(kDouble);
    optim::SGD opt(net->parameters(), 0.1);
    dist::DDPOptions o;
    o.bucket_cap_mb = 300.0 / (1024 * 1024);
    dist::DistributedDataParallel ddp(net, o);
    auto body = [&](Tensor x, Tensor y) {
      opt.zero_grad();
      Tensor l = net->loss(x, y);
      l.backward();
      opt.step();
      return l;
    };
    auto step = jit(body, "ddp_sizes");
    for (int64_t n : sizes) {
      Tensor x = d.x.narrow(0, r * 6, n).contiguous(), y = d.y.narrow(0, r * 6, n).contiguous();
      traced ? step(x, y) : body(x, y);
    }
    if (traced && world > 1) CHECK(step.stats().background_compiles == 0);
    return net->parameters();
  };
  const std::vector<Tensor> eager = run(false), traced = run(true);
  for (size_t i = 0; i < eager.size(); ++i) CHECK(max_abs_diff(eager[i], traced[i]) < 1e-12);
}

TEST_CASE("a traced data-parallel step is one plan whose buckets start before the backward ends") {
  ensure_init();
  auto net = std::make_shared<Net>(kFloat);
  optim::SGD opt(net->parameters(), 0.1);
  dist::DDPOptions o;
  o.bucket_cap_mb = 300.0 / (1024 * 1024);
  dist::DistributedDataParallel ddp(net, o);
  auto step = jit([&](Tensor x, Tensor y) {
    opt.zero_grad();
    Tensor l = net->loss(x, y);
    l.backward();
    opt.step();
    return l;
  }, "ddp_step");
  Data d = global_batch(kFloat, 6);
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln_ddp_dump_" + std::to_string(::getpid()));
  step.dump(dir.string(), d.x, d.y);
  fs::path found;  // <dir>/ddp_step/<signature>/NN_collectives.txt
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().ends_with("_collectives.txt")) found = e.path();
  std::ifstream in(found);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  MESSAGE(text.str());
  // Four gradients (w2 and b2 first) in buckets of about 300 bytes: b2+w2 (272 B),
  // b1 (64 B) with nothing else fitting... at least three buckets.
  int buckets = 0, overlapped = 0;
  std::string line;
  while (std::getline(text, line)) {
    if (line.rfind("bucket ", 0) != 0) continue;
    ++buckets;
    size_t a = line.find("starts after group "), w = line.find("waited for at group ");
    REQUIRE(w != std::string::npos);
    const long wait_at = std::stol(line.substr(w + 20));
    const long start = a == std::string::npos ? -1 : std::stol(line.substr(a + 19));
    CHECK(start < wait_at);
    overlapped += wait_at - start > 1;  // groups run between the start and the wait
  }
  CHECK(buckets >= 3);
  CHECK(overlapped >= 1);
  fs::remove_all(dir);
}

TEST_CASE("the distributed sampler splits a data set among the ranks") {
  ensure_init();
  const int world = dist::world_size();
  dist::DistributedSampler sampler(10, /*shuffle=*/true, /*seed=*/3);
  std::vector<int64_t> mine = sampler.indices();
  CHECK(static_cast<int64_t>(mine.size()) == (10 + world - 1) / world);
  Tensor all = dist::all_gather(
      from_vector(std::vector<double>(mine.begin(), mine.end()), {sampler.size()}, TensorOptions(kLong)));
  std::vector<int64_t> v = all.to_vector<int64_t>();
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < 10; ++i) CHECK(std::binary_search(v.begin(), v.end(), i));
  sampler.set_epoch(1);
  CHECK(sampler.indices() != mine);
  dist::DistributedSampler dropped(11, false, 0, /*drop_last=*/true, 2, 1);
  CHECK(dropped.indices() == std::vector<int64_t>{1, 3, 5, 7, 9});
}

TEST_CASE("a backward() over a graph without the module's parameters communicates nothing") {
  ensure_init();
  auto net = std::make_shared<Net>(kFloat);
  dist::DistributedDataParallel ddp(net);
  Data d = global_batch(kFloat, 4);
  net->loss(d.x, d.y).backward();  // every rank: the gradients are averaged
  const Tensor g_before = net->w1.grad().clone();
  // On rank 0 only, a backward over another graph: the module's gradients are
  // defined, but this backward did not reach them.
  if (dist::rank() == 0) {
    const int64_t calls = collectives::stats().calls;
    Tensor w = randn({3}).requires_grad_(true);
    (w * w).sum().backward();
    auto f = jit([](Tensor v) {
      Tensor l = (v * v).sum();
      l.backward();
      return l;
    });
    (void)f(randn({3}).requires_grad_(true));
    CHECK(collectives::stats().calls == calls);
  }
  CHECK(max_abs_diff(net->w1.grad(), g_before) == 0);
  // The ranks are still in step: the next step averages on every rank.
  for (Tensor& p : net->parameters()) p.grad().zero_();
  net->loss(d.x, d.y).backward();
  Tensor w1g = net->w1.grad().clone();
  dist::all_reduce(w1g, ReduceOp::max);
  CHECK(max_abs_diff(w1g, net->w1.grad()) == 0);
}

namespace {

// Gradients of the mean loss over `micro` micro-batches of each rank's share
// (each rank's share is rows [r*n, (r+1)*n) of a global batch), accumulated
// (summed over micro-batches) and averaged over the ranks, as one process
// computes them: what DDP with no_sync must give.
std::vector<Tensor> reference_accumulated(int world, int64_t n, int micro) {
  auto net = std::make_shared<Net>(kDouble);
  Data d = global_batch(kDouble, n * world * micro);
  for (int r = 0; r < world; ++r)
    for (int m = 0; m < micro; ++m) {
      const int64_t at = (r * micro + m) * n;
      net->loss(d.x.narrow(0, at, n), d.y.narrow(0, at, n)).backward();
    }
  std::vector<Tensor> out;
  for (Tensor& p : net->parameters()) out.push_back(p.grad() / double(world));
  return out;
}

}  // namespace

TEST_CASE(
    "no_sync accumulates gradients locally; the next backward averages them (eager and traced)") {
  ensure_init();
  const int world = dist::world_size(), r = dist::rank();
  const int64_t n = 3;
  const int micro = 3;
  const std::vector<Tensor> want = reference_accumulated(world, n, micro);
  Data d = global_batch(kDouble, n * world * micro);
  auto batch = [&](int m) {
    const int64_t at = (r * micro + m) * n;
    return std::make_pair(d.x.narrow(0, at, n).contiguous(), d.y.narrow(0, at, n).contiguous());
  };
  auto check_grads = [&](const std::shared_ptr<Net>& net) {
    std::vector<Tensor> got = net->parameters();
    for (size_t i = 0; i < got.size(); ++i) CHECK(max_abs_diff(got[i].grad(), want[i]) < 1e-12);
  };

  SUBCASE("eager") {
    auto net = std::make_shared<Net>(kDouble);
    dist::DistributedDataParallel ddp(net);
    const int64_t calls = collectives::stats().calls;
    {
      auto scope = ddp.no_sync();
      CHECK_FALSE(ddp.require_backward_grad_sync());
      for (int m = 0; m + 1 < micro; ++m) net->loss(batch(m).first, batch(m).second).backward();
    }
    CHECK(collectives::stats().calls == calls);  // nothing went over the wire
    CHECK(ddp.require_backward_grad_sync());
    net->loss(batch(micro - 1).first, batch(micro - 1).second).backward();
    CHECK(collectives::stats().calls == calls + 4);  // one per parameter
    check_grads(net);
  }

  SUBCASE("traced, the scope opened around the calls") {
    auto net = std::make_shared<Net>(kDouble);
    dist::DistributedDataParallel ddp(net);
    auto step = jit(
        [&](Tensor x, Tensor y) {
          Tensor l = net->loss(x, y);
          l.backward();
          return l;
        },
        "accumulate");
    const int64_t calls = collectives::stats().calls;
    {
      auto scope = ddp.no_sync();
      for (int m = 0; m + 1 < micro; ++m) step(batch(m).first, batch(m).second);
    }
    CHECK(collectives::stats().calls == calls);
    step(batch(micro - 1).first, batch(micro - 1).second);  // traced again: now it averages
    CHECK(collectives::stats().calls > calls);
    check_grads(net);
    const std::vector<std::string>& why = step.stats().miss_reasons;
    CHECK(std::any_of(why.begin(), why.end(), [](const std::string& s) {
      return s.find("DistributedDataParallel's no_sync() changed: open 1 -> 0") !=
             std::string::npos;
    }));
  }

  SUBCASE("traced, the scope inside the step") {
    auto net = std::make_shared<Net>(kDouble);
    dist::DistributedDataParallel ddp(net);
    static_assert(micro == 3);
    auto step = jit(
        [&](Tensor x0, Tensor y0, Tensor x1, Tensor y1, Tensor x2, Tensor y2) {
          {
            auto scope = ddp.no_sync();
            net->loss(x0, y0).backward();
            net->loss(x1, y1).backward();
          }
          Tensor l = net->loss(x2, y2);
          l.backward();
          return l;
        },
        "accumulate3");
    auto [x0, y0] = batch(0);
    auto [x1, y1] = batch(1);
    auto [x2, y2] = batch(2);
    step(x0, y0, x1, y1, x2, y2);
    check_grads(net);
    std::ostringstream graph;
    graph << step.graph(x0, y0, x1, y1, x2, y2);
    size_t all_reduces = 0;
    for (size_t at = graph.str().find("all_reduce"); at != std::string::npos;
         at = graph.str().find("all_reduce", at + 1))
      ++all_reduces;
    CHECK(all_reduces == 4);  // once per parameter, after the last backward
    // With the gradients now defined (zeroed) the step traces once more, then
    // holds: the scope inside it is part of it.
    for (int call = 0; call < 2; ++call) {
      for (Tensor& p : net->parameters()) p.grad().zero_();
      step(x0, y0, x1, y1, x2, y2);
      check_grads(net);
    }
    CHECK(step.stats().misses == 2);
    for (const std::string& why : step.stats().miss_reasons)
      CHECK(why.find("no_sync") == std::string::npos);
  }
}
