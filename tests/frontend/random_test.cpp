// Random numbers (frontend/random.cpp, frontend/generator.h): float64 draws
// carry 53 random bits, randint covers int64 without bias, and Generator
// objects and the default generators' states can be read, set and used in
// compiled functions, which draw what eager code draws.
#include <cstdint>
#include <set>

#include "runtime/allocator.h"
#include "runtime/reference.h"
#include "test_util.h"

namespace kiln {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return equal(a, b);
}

// How many elements of an f64 tensor are not float32 values.
int64_t not_float32(const Tensor& t) {
  int64_t n = 0;
  for (double v : t.to_vector<double>()) n += double(float(v)) != v;
  return n;
}

}  // namespace

TEST_CASE("float64 rand and randn carry 53 random bits; float32 draws keep their stream") {
  const int64_t n = 4096;
  manual_seed(5);
  const std::vector<float> f = rand({n}).to_vector<float>();
  manual_seed(5);
  const std::vector<double> d = rand({n}, kFloat64).to_vector<double>();
  int64_t truncation_differs = 0, stream_differs = 0;
  for (int64_t i = 0; i < n; ++i) {
    // The f32 stream is the op's 24-bit draw at counter i, as before 53-bit draws.
    stream_differs += f[size_t(i)] != philox_uniform(5, i);
    // The f64 draw at the same counter refines it: its top 24 bits are the f32 draw.
    truncation_differs += std::floor(std::ldexp(d[size_t(i)], 24)) != std::ldexp(f[size_t(i)], 24);
    CHECK_FALSE(d[size_t(i)] != philox_uniform_f64(5, i));
  }
  CHECK(stream_differs == 0);
  CHECK(truncation_differs == 0);
  CHECK(not_float32(from_vector(d, {n}, kFloat64)) > n - 10);

  manual_seed(6);
  Tensor z = randn({100000}, kFloat64);
  CHECK(z.dtype() == kFloat64);
  CHECK(not_float32(z) > 100000 - 100);
  CHECK(std::abs(z.mean().item<double>()) < 0.01);
  CHECK(std::abs(z.std().item<double>() - 1) < 0.01);
  // 1 - u1 > 0 for every 53-bit u1: no infinity.
  CHECK(z.abs().max().item<double>() < 10);

  // Traced draws are eager draws: rand bit for bit, randn to the math's accuracy.
  auto f64 = jit([](Tensor x) { return x + rand({n}, kFloat64); });
  auto normal = jit([](Tensor x) { return x + randn({n}, kFloat64); });
  Tensor zero = zeros({n}, kFloat64);
  manual_seed(7);
  Tensor tu = f64(zero), tn = normal(zero);
  manual_seed(7);
  Tensor eu = rand({n}, kFloat64), en = randn({n}, kFloat64);
  CHECK(same_bits(tu, eu));
  CHECK((tn - en).abs().max().item<double>() < 1e-12);
  CHECK(not_float32(tu) > n - 10);
}

TEST_CASE("randint covers the whole int64 range without bias, eagerly and traced") {
  manual_seed(3);
  const std::vector<int64_t> all = randint(INT64_MIN, INT64_MAX, {4096}).to_vector<int64_t>();
  int64_t below = 0, above = 0;
  for (int64_t v : all) {
    below += v < -(int64_t(1) << 62);
    above += v > (int64_t(1) << 62);
    CHECK_FALSE(v == INT64_MAX);
  }
  CHECK(below > 800);
  CHECK(above > 800);

  // Beyond the former 2^24 cap; 40-bit values use all their bits.
  Tensor wide = randint(0, int64_t(1) << 40, {4096});
  CHECK(wide.max().item<int64_t>() > (int64_t(1) << 39));
  CHECK(wide.remainder(2).sum().item<int64_t>() > 1800);

  // A range of 3 * 2^62: with modulo bias half the draws land in the lowest third.
  const std::vector<int64_t> r = randint(INT64_MIN, int64_t(1) << 62, {60000}).to_vector<int64_t>();
  int64_t lowest = 0;
  for (int64_t v : r) lowest += v < INT64_MIN + (int64_t(1) << 62);
  CHECK(double(lowest) / 60000 == doctest::Approx(1.0 / 3).epsilon(0.03));

  // Small ranges, and other dtypes whose values the range must be.
  Tensor small = randint(-1, 2, {30000});
  for (int64_t v : {-1, 0, 1})
    CHECK(small.eq(v).to(kFloat64).mean().item<double>() == doctest::Approx(1.0 / 3).epsilon(0.05));
  CHECK(randint(0, 5, {3}, kInt32).dtype() == kInt32);
  CHECK(randint(0, 2, {3}, kBool).dtype() == kBool);
  KILN_CHECK_ERROR(randint(0, int64_t(1) << 40, {2}, kInt32),
                   "randint: the range [0, 1099511627776) does not fit dtype i32");
  KILN_CHECK_ERROR(randint(-1, 2, {2}, kBool), "does not fit dtype bool");
  KILN_CHECK_ERROR(randint(0, (int64_t(1) << 24) + 2, {2}, kFloat32), "does not fit dtype f32");
  KILN_CHECK_ERROR(randint(5, 5, {2}), "randint: expected low < high, got [5, 5)");

  // Compiled: the same integers, bit for bit, and fresh ones at every call.
  auto f = jit(
      [](Tensor x) { return x + randint(INT64_MIN, int64_t(1) << 62, {257}) + randint(7, {257}); });
  Tensor zero = zeros({257}, kInt64);
  manual_seed(4);
  Tensor t1 = f(zero), t2 = f(zero);
  manual_seed(4);
  Tensor e1 = randint(INT64_MIN, int64_t(1) << 62, {257}) + randint(7, {257});
  Tensor e2 = randint(INT64_MIN, int64_t(1) << 62, {257}) + randint(7, {257});
  CHECK(same_bits(t1, e1));
  CHECK(same_bits(t2, e2));
  CHECK_FALSE(same_bits(t1, t2));
}

TEST_CASE("Generator: an independent stream with a seed, an offset and a state") {
  Generator g;
  CHECK(g.device() == Device(kCPU));
  CHECK(g.current_seed() == kDefaultSeed);
  g.manual_seed(42);
  Generator h = Generator().manual_seed(42);
  CHECK(same_bits(rand({5}, g), rand({5}, h)));
  CHECK(g.get_offset() == 5);
  randn({3}, g);  // two counters per element
  CHECK(g.get_offset() == 11);

  // Its draws leave the default generator where it was.
  manual_seed(1);
  Tensor d0 = rand({3});
  manual_seed(1);
  rand({100}, g);
  randint(0, 9, {100}, g);
  randperm(10, g);
  bernoulli(full({4}, 0.5), g);
  CHECK(same_bits(rand({3}), d0));

  // The state: {seed, offset} as int64; set back, the stream repeats.
  Tensor s = g.get_state();
  CHECK(s.dtype() == kInt64);
  CHECK(s.sizes() == Shape{2});
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{42, int64_t(g.get_offset())});
  Tensor a = randn({10}, g, kFloat64), ai = randint(-5, 5, {10}, g), ap = randperm(20, g);
  g.set_state(s);
  CHECK(same_bits(randn({10}, g, kFloat64), a));
  CHECK(same_bits(randint(-5, 5, {10}, g), ai));
  CHECK(same_bits(randperm(20, g), ap));

  // Seeds keep all 64 bits; seed() picks one and reports it.
  g.manual_seed(UINT64_MAX);
  CHECK(g.current_seed() == UINT64_MAX);
  CHECK(g.initial_seed() == UINT64_MAX);
  const uint64_t picked = g.seed();
  CHECK(g.current_seed() == picked);
  g.set_offset(uint64_t(1) << 40);
  CHECK(g.get_offset() == uint64_t(1) << 40);

  // Copies share the state; clone() does not.
  Generator same = g, copy = g.clone();
  CHECK(same == g);
  CHECK_FALSE(copy == g);
  CHECK(same_bits(rand({4}, copy), rand({4}, same)));
  CHECK(g.get_offset() == (uint64_t(1) << 40) + 4);
  rand({4}, copy);
  CHECK(g.get_offset() == (uint64_t(1) << 40) + 4);

  KILN_CHECK_ERROR(g.set_state(zeros({3}, kInt64)),
                   "set_state: expected an int64 tensor of shape [2] (seed, offset)", "got i64[3]");
  KILN_CHECK_ERROR(g.set_state(zeros({2})), "got f32[2]");
  KILN_CHECK_ERROR(g.set_state(Tensor()), "got an undefined tensor");
  KILN_CHECK_ERROR(rand({2}, g, TensorOptions().device(kCUDA)),
                   "rand: the generator is on cpu, the result on cuda:0");
}

TEST_CASE("default generators: manual_seed, get_rng_state and set_rng_state") {
  manual_seed(3);
  CHECK(default_generator().current_seed() == 3);
  CHECK(default_generator() == default_generator(kCPU));
  Tensor s = get_rng_state();
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{3, 0});
  Tensor a = rand({4}), b = randn({4}), c = randint(0, 100, {4}), p = randperm(8);
  CHECK(get_rng_state().to_vector<int64_t>() == std::vector<int64_t>{3, 4 + 8 + 4 + 8});
  set_rng_state(s);
  CHECK(same_bits(rand({4}), a));
  CHECK(same_bits(randn({4}), b));
  CHECK(same_bits(randint(0, 100, {4}), c));
  CHECK(same_bits(randperm(8), p));
  // rand(shape, default_generator()) is rand(shape).
  set_rng_state(s);
  CHECK(same_bits(rand({4}, default_generator()), a));
  KILN_CHECK_ERROR(set_rng_state(ones({2})), "expected an int64 tensor of shape [2]");
}

TEST_CASE("generators in compiled functions draw what eager code draws") {
  Tensor x = zeros({64});

  // A captured generator advances at every call, as eagerly.
  Generator g;
  auto f = jit([&](Tensor in) { return in + rand({64}, g); });
  g.manual_seed(3);
  Tensor t1 = f(x), t2 = f(x);
  CHECK(g.get_offset() == 128);
  g.manual_seed(3);
  CHECK(same_bits(t1, x + rand({64}, g)));
  CHECK(same_bits(t2, x + rand({64}, g)));

  // Seeded inside the function, the plan seeds at every call.
  auto reseeded = jit([&](Tensor in) {
    g.manual_seed(8);
    return in + rand({64}, g);
  });
  Tensor r1 = reseeded(x), r2 = reseeded(x);
  CHECK(same_bits(r1, r2));
  CHECK(g.get_offset() == 64);
  CHECK(g.current_seed() == 8);
  g.manual_seed(8);
  CHECK(same_bits(r1, x + rand({64}, g)));

  // A generator made inside the function is the function's own.
  auto local = jit([](Tensor in) {
    Generator mine;
    mine.manual_seed(5);
    return in + rand({64}, mine) + randn({64}, mine);
  });
  Generator mine;
  mine.manual_seed(5);
  Tensor want = x + rand({64}, mine) + randn({64}, mine);
  CHECK((local(x) - want).abs().max().item<double>() < 1e-6);
  CHECK(same_bits(local(x), local(x)));

  // set_state inside: every call starts from the state given.
  g.manual_seed(11);
  Tensor s = g.get_state();
  auto from_state = jit([&](Tensor in, Tensor state) {
    g.set_state(state);
    return in + rand({64}, g);
  });
  Tensor u1 = from_state(x, s), u2 = from_state(x, s);
  CHECK(same_bits(u1, u2));
  g.set_state(s);
  CHECK(same_bits(u1, x + rand({64}, g)));

  // The default generator's state after compiled calls is eager mode's.
  auto drop = jit([](Tensor in) { return nn::functional::dropout(in, 0.5, true); });
  Tensor ones64 = ones({64});
  manual_seed(2);
  for (int i = 0; i < 3; ++i) drop(ones64);
  Tensor traced_state = get_rng_state();
  manual_seed(2);
  for (int i = 0; i < 3; ++i) nn::functional::dropout(ones64, 0.5, true);
  CHECK(same_bits(traced_state, get_rng_state()));

  const int line = __LINE__ + 2;  // manual_seed's line
  auto seeds = jit([](Tensor in) {
    manual_seed(1);
    return in + 1;
  });
  const std::string where = "random_test.cpp:" + std::to_string(line);
  KILN_CHECK_ERROR(seeds(x), "manual_seed inside a traced function",
                   "seed a Generator and draw from it", where.c_str());
}

TEST_CASE("bernoulli: 1 with each element's probability, in its dtype") {
  manual_seed(4);
  Tensor p = tensor({0.0, 0.3, 1.0, -0.5}, kFloat64).expand({20000, 4});
  Tensor b = bernoulli(p);
  CHECK(b.dtype() == kFloat64);
  Tensor mean = b.mean(0);
  CHECK(mean.to_vector<double>()[0] == 0);
  CHECK(mean.to_vector<double>()[1] == doctest::Approx(0.3).epsilon(0.03));
  CHECK(mean.to_vector<double>()[2] == 1);
  CHECK(mean.to_vector<double>()[3] == 0);
  Tensor q = bernoulli(zeros({40000}, kInt32), 0.25);
  CHECK(q.dtype() == kInt32);
  CHECK(q.to(kFloat64).mean().item<double>() == doctest::Approx(0.25).epsilon(0.04));
  Generator g;
  g.manual_seed(1);
  Tensor first = bernoulli(full({100}, 0.5), g);
  g.manual_seed(1);
  CHECK(same_bits(bernoulli(full({100}, 0.5), g), first));
  auto f = jit([&](Tensor probs) { return bernoulli(probs, g); });
  g.manual_seed(1);
  CHECK(same_bits(f(full({100}, 0.5)), first));
  KILN_CHECK_ERROR(bernoulli(zeros({2}, kInt64)), "bernoulli: expected a floating tensor");
  KILN_CHECK_ERROR(bernoulli(zeros({2}), 1.5), "bernoulli: expected a probability in [0, 1]");
}

TEST_CASE(
    "a large eager draw is made in chunks: the same numbers as one traced draw, and a chunk's "
    "temporaries") {
  // 5M elements: chunks of 32K, the last taking the rest.
  const Shape s{5, 1000, 1000};
  auto make = [&](int kind) {
    return kind == 0 ? randn(s) : kind == 1 ? rand(s, kFloat64) : randint(-7, 9, s);
  };
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    manual_seed(21);
    auto traced = jit([&](Tensor) { return make(kind); });
    Tensor t = traced(zeros({1}));
    const int64_t offset_after = default_generator().get_offset();
    manual_seed(21);
    cpu_empty_cache();
    const AllocatorStats before = cpu_allocator_stats();
    Tensor e = make(kind);
    const AllocatorStats after = cpu_allocator_stats();
    CHECK(default_generator().get_offset() == offset_after);
    CHECK(same_bits(e, t));
    // The result plus a few chunk-sized temporaries held in the cache, not
    // several result-sized ones (the unchunked draw kept 3x the result).
    CHECK(after.bytes_cached + after.bytes_in_use - before.bytes_in_use <
          size_t(e.numel()) * e.element_size() + (size_t(40) << 20));
  }
}

}  // namespace kiln
