// The two tiers of CPU kernels (CodeTier, runtime/llvm_jit.h): the quick tier
// (-O0 machine code, no IR optimisation where that cannot change a result) and
// the optimised code compute the same bits, so a call's result never depends on
// when the background compile thread swaps the optimised code in. And the
// swap itself: quick code first, optimised code later, only the optimised code
// in the disk cache.
#include <doctest/doctest.h>

#include <kiln/kiln.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "frontend/settings.h"
#include "runtime/llvm_jit.h"

namespace kiln {
namespace {

// Sets the tier (and no sharing of kernels loaded before, no disk cache) while it lives.
struct TierScope {
  explicit TierScope(CodeTier tier, std::string cache = "") : saved_(settings()) {
    settings().tier = tier;
    settings().reuse_kernels = false;
    set_cache_dir(std::move(cache));
  }
  ~TierScope() { settings() = saved_; }

 private:
  Settings saved_;
};

// Whether the elements at x and y of type T are both NaN; else says which
// values differ in `where`.
template <class T>
bool both_nan(const unsigned char* x, const unsigned char* y, int64_t i, std::string* where) {
  T a, b;
  std::memcpy(&a, x, sizeof(T));
  std::memcpy(&b, y, sizeof(T));
  if (std::isnan(a) && std::isnan(b)) return true;
  *where = "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b);
  return false;
}

// Whether a and b hold the same bits (any NaN equals any NaN: LLVM keeps no NaN
// payload, and neither do the reference kernels).
bool same_bits(const Tensor& a, const Tensor& b, std::string* where) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) {
    *where = "dtype or shape";
    return false;
  }
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t size = ca.element_size();
  const auto* pa = static_cast<const unsigned char*>(ca.data_ptr());
  const auto* pb = static_cast<const unsigned char*>(cb.data_ptr());
  for (int64_t i = 0; i < ca.numel(); ++i) {
    const unsigned char* x = pa + static_cast<size_t>(i) * size;
    const unsigned char* y = pb + static_cast<size_t>(i) * size;
    if (std::memcmp(x, y, size) == 0) continue;
    const bool nan = a.dtype() == kFloat32   ? both_nan<float>(x, y, i, where)
                     : a.dtype() == kFloat64 ? both_nan<double>(x, y, i, where)
                                             : (*where = "element " + std::to_string(i), false);
    if (!nan) return false;
  }
  return true;
}

using Fn = std::function<Tensor(Tensor, Tensor)>;

// f traced afresh in `tier`, called on (x, y).
Tensor run_in(CodeTier tier, const Fn& f, const Tensor& x, const Tensor& y) {
  TierScope scope(tier);
  auto traced = jit([&](Tensor a, Tensor b) { return f(a, b); });
  return traced(x, y);
}

void check_tiers_agree(const char* name, const Fn& f, const Tensor& x, const Tensor& y) {
  CAPTURE(name);
  const Tensor quick = run_in(CodeTier::Quick, f, x, y);
  const Tensor optimised = run_in(CodeTier::Optimised, f, x, y);
  std::string where;
  CHECK_MESSAGE(same_bits(quick, optimised, &where), where);
}

TEST_CASE("tier: the quick and the optimised tier compute the same bits") {
  wait_for_background_compiles();  // nothing of other tests' still loading kernels
  struct Case {
    const char* name;
    Fn f;
  };
  const std::vector<Case> cases = {
      {"elementwise chain",
       [](Tensor x, Tensor y) {
         return (x * y + 1).exp().tanh() * x.sigmoid() - x.abs().sqrt() / (y * y + 1);
       }},
      {"math ops",
       [](Tensor x, Tensor y) {
         return x.erf() + (x.abs() + 1).log1p() + (x * 0.5).expm1() + (x.abs() + 0.5).pow(y) +
                x.gelu() + (y * 3).round() - (x * 7).fmod(2.5) + x.clamp(-0.5, 0.75) +
                where(x > y, x, y) + atan2(x, y) + x.cos() * y.sin();
       }},
      {"sum and mean of rows", [](Tensor x, Tensor y) { return (x * y).sum(1) + x.mean(1); }},
      {"sum of columns", [](Tensor x, Tensor y) { return (x - y).sum(0); }},
      {"sum of all", [](Tensor x, Tensor y) { return (x * y).sum().reshape({1}) + x.mean(); }},
      {"max, min and argmax of rows",
       [](Tensor x, Tensor y) {
         return x.amax({1}) + (x * y).amin({1}) + x.argmax(1).to(kFloat32);
       }},
      {"exp sum and logsumexp", [](Tensor x, Tensor) { return x.exp().sum(1) + x.logsumexp(1); }},
      {"variance", [](Tensor x, Tensor) { return x.var(1); }},
      {"softmax rows", [](Tensor x, Tensor) { return x.softmax(1); }},
      {"log_softmax rows", [](Tensor x, Tensor y) { return (x + y).log_softmax(1); }},
      {"layer norm", [](Tensor x, Tensor) { return nn::functional::layer_norm(x, {x.size(1)}); }},
      {"cumsum", [](Tensor x, Tensor) { return x.cumsum(1); }},
      {"matmul epilogues",
       [](Tensor x, Tensor y) {
         const Tensor w = y.t().contiguous();
         return (x.matmul(w) + 0.25).relu() + (x.matmul(w) - 1).tanh();
       }},
      {"a small broadcast dimension",
       [](Tensor x, Tensor y) {
         const Tensor b = y.narrow(1, 0, 1).reshape({-1}).narrow(0, 0, 1);
         return x * b + x.narrow(1, 0, 1).exp();
       }},
  };
  const std::vector<Shape> shapes = {{37, 129}, {5, 1000}, {3, 4099}, {64, 10}, {1, 1}};
  for (const Shape& shape : shapes) {
    for (DType dt : {kFloat32, kFloat64}) {
      manual_seed(7);
      const Tensor x = randn(shape).to(dt), y = randn(shape).to(dt);
      CAPTURE(shape.size() ? shape[1] : 0);
      CAPTURE(dt == kFloat32 ? "f32" : "f64");
      for (const Case& c : cases) check_tiers_agree(c.name, c.f, x, y);
    }
  }
  manual_seed(3);
  const Tensor i = (rand({41, 67}) * 200 - 100).to(kInt32);
  check_tiers_agree(
      "integer ops",
      [](Tensor a, Tensor b) { return (a * 3 + 7).remainder(5) + (a - b).sum(1, true); }, i,
      i.flip({1}));
}

// The MLP training step of issue #37 (784-256-128-10, ReLU and Tanh,
// cross-entropy, Adam), `steps` calls from the same weights.
std::vector<Tensor> train_mlp(CodeTier tier, int steps) {
  TierScope scope(tier);
  manual_seed(11);
  nn::Sequential model(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 128), nn::Tanh(),
                       nn::Linear(128, 10));
  optim::Adam opt(model->parameters(), 1e-3);
  auto step = jit([&](Tensor in, Tensor target) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model(in), target);
    loss.backward();
    opt.step();
    return loss;
  });
  const Tensor x = randn({64, 784}), y = (rand({64}) * 10).to(kInt64);
  std::vector<Tensor> out;
  for (int s = 0; s < steps; ++s) out.push_back(step(x, y));
  for (const Tensor& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST_CASE("tier: the MLP Adam step trains to the same bits in either tier") {
  wait_for_background_compiles();
  const std::vector<Tensor> quick = train_mlp(CodeTier::Quick, 3);
  const std::vector<Tensor> optimised = train_mlp(CodeTier::Optimised, 3);
  REQUIRE(quick.size() == optimised.size());
  for (size_t i = 0; i < quick.size(); ++i) {
    CAPTURE(i);
    std::string where;
    CHECK_MESSAGE(same_bits(quick[i], optimised[i], &where), where);
  }
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  if (std::filesystem::exists(dir))
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
      n += e.is_regular_file() ? 1 : 0;
  return n;
}

TEST_CASE("tier: quick code first, the optimised code swapped in, only it on disk") {
  wait_for_background_compiles();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln_tier_test_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  manual_seed(5);
  const Tensor x = randn({33, 300}), y = randn({33, 300});
  auto f = [](Tensor a, Tensor b) { return (a * b).exp().sum(1) + (a - b).tanh().mean(1); };

  SUBCASE("the quick tier alone writes nothing to disk") {
    TierScope scope(CodeTier::Quick, dir);
    auto g = jit(f);
    const Tensor r = g(x, y);
    wait_for_background_compiles();
    CHECK(files_in(dir) == 0);
  }
  SUBCASE("tiered: the optimised objects follow, and the results stay the same") {
    Tensor expected;
    {
      TierScope scope(CodeTier::Optimised);
      expected = jit(f)(x, y);
    }
    TierScope scope(CodeTier::Tiered, dir);
    auto g = jit(f);
    const size_t before = LlvmJit::get().loaded_objects();
    const Tensor first = g(x, y);
    const size_t quick = LlvmJit::get().loaded_objects() - before;
    CHECK(quick > 0);
    wait_for_background_compiles();
    // Each quick kernel now has its optimised code loaded beside it, and on disk.
    CHECK(LlvmJit::get().loaded_objects() - before == 2 * quick);
    CHECK(files_in(dir) == quick);
    const Tensor second = g(x, y);
    std::string where;
    CHECK_MESSAGE(same_bits(first, expected, &where), where);
    CHECK_MESSAGE(same_bits(second, expected, &where), where);
    // A new process (here: a new function, nothing shared) loads them from disk.
    auto h = jit(f);
    const Tensor third = h(x, y);
    CHECK(h.stats().kernels_from_disk == static_cast<int64_t>(quick));
    CHECK_MESSAGE(same_bits(third, expected, &where), where);
  }
  std::filesystem::remove_all(dir);
}

// A copy of `values` placed so that its last element ends where a page the
// process may not touch (PROT_NONE) begins: a kernel reading past its end
// faults. User memory (from_blob) and Kiln's own large buffers, which mmap
// gives whole pages, both end there.
class AtPageEnd {
 public:
  explicit AtPageEnd(const Tensor& values) {
    const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const Tensor c = values.contiguous();
    const size_t bytes = static_cast<size_t>(c.numel()) * c.element_size();
    size_ = (bytes + page - 1) / page * page + page;
    base_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(base_ != MAP_FAILED);
    char* guard = static_cast<char*>(base_) + size_ - page;
    REQUIRE(::mprotect(guard, page, PROT_NONE) == 0);
    std::memcpy(guard - bytes, c.data_ptr(), bytes);
    tensor_ = from_blob(guard - bytes, c.sizes(), TensorOptions(c.dtype()));
  }
  AtPageEnd(const AtPageEnd&) = delete;
  AtPageEnd& operator=(const AtPageEnd&) = delete;
  ~AtPageEnd() {
    tensor_ = Tensor();
    ::munmap(base_, size_);
  }
  const Tensor& tensor() const { return tensor_; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
  Tensor tensor_;
};

// ReLU's gradient at pre-activation h for the output gradient dy.
Tensor relu_grad(Tensor h, Tensor dy) {
  const Tensor a = h.detach().requires_grad_();
  return autograd::grad({relu(a)}, {a}, {dy})[0];
}

struct NamedFn {
  const char* name;
  Fn f;
};

// Each of `cases` on copies of h and dy that end at a page's end: eagerly, and
// traced in each tier (tiered: its quick code, then its optimised code), as
// on h and dy themselves.
void check_at_page_end(const std::vector<NamedFn>& cases, const Tensor& h, const Tensor& dy) {
  const AtPageEnd h_end(h), dy_end(dy);
  for (const NamedFn& c : cases) {
    CAPTURE(c.name);
    const Tensor expected = c.f(h, dy);
    // Eagerly: the reference kernels, and exp's compiled eager kernel.
    CHECK(allclose(c.f(h_end.tensor(), dy_end.tensor()), expected));
    for (CodeTier tier : {CodeTier::Quick, CodeTier::Optimised, CodeTier::Tiered}) {
      CAPTURE(code_tier_name(tier));
      TierScope scope(tier);
      auto traced = jit([&](Tensor a, Tensor b) { return c.f(a, b); });
      const Tensor first = traced(h_end.tensor(), dy_end.tensor());
      wait_for_background_compiles();  // tiered: the optimised code swapped in
      const Tensor second = traced(h_end.tensor(), dy_end.tensor());
      CHECK(allclose(first, expected, 1e-4, 1e-5));
      std::string where;
      CHECK_MESSAGE(same_bits(first, second, &where), where);
    }
  }
}

// LLVM's FastISel (the quick tier's instruction selector) lowered a float
// select on a compare as a 16-byte vblendvpd/vblendvps and folded the scalar
// load of the selected value into it: a read 8 or 12 bytes past the element,
// which faulted on the last element of a buffer ending at a page's end.
TEST_CASE("tier: no kernel reads past a buffer that ends at a page's end") {
  wait_for_background_compiles();
  const std::vector<NamedFn> selects = {
      {"where", [](Tensor h, Tensor dy) { return where(h > 0, dy, zeros_like(dy)); }},
      {"where, sum of columns",
       [](Tensor h, Tensor dy) { return where(h > 0, dy, zeros_like(dy)).sum(0); }},
      {"where, sum of rows",
       [](Tensor h, Tensor dy) { return where(h > 0, dy, zeros_like(dy)).sum(1); }},
      {"where of two inputs", [](Tensor h, Tensor dy) { return where(dy < h, h, dy); }},
  };
  std::vector<NamedFn> floats = selects;
  floats.push_back({"relu backward", relu_grad});
  floats.push_back(
      {"relu backward, bias gradient", [](Tensor h, Tensor dy) { return relu_grad(h, dy).sum(0); }});
  floats.push_back({"relu, clamp, exp",
                    [](Tensor h, Tensor dy) { return h.relu() + dy.clamp(-0.5, 0.5).exp(); }});
  for (const Shape& shape : std::vector<Shape>{{256, 1024}, {37, 129}, {3, 4099}}) {
    CAPTURE(shape[1]);
    for (DType dt : {kFloat32, kFloat64, kBool, kUInt8, kInt8, kInt16, kInt32, kInt64}) {
      CAPTURE(dtype_name(dt));
      manual_seed(13);
      const bool fp = dt == kFloat32 || dt == kFloat64;
      const Tensor h = fp ? randn(shape).to(dt) : (rand(shape) * 100).to(dt);
      const Tensor dy = fp ? randn(shape).to(dt) : (rand(shape) * 100).to(dt);
      check_at_page_end(fp ? floats : selects, h, dy);
    }
  }
}
}  // namespace
}  // namespace kiln
