// Random numbers that compile: a counter-based generator (Philox-4x32-10, the
// op table's `philox`) with a key (the seed) and an offset, held per device as
// two 0-d int64 tensors. A draw of n elements reads elements offset .. offset+n-1
// of the stream (element i is philox(key, offset + i)) and advances the offset
// in place by n.
//
// Draws are ordinary ops on those tensors, so the same code runs eagerly and
// inside a trace: traced, the key and offset are captured tensors (inputs of the
// compiled plan) and the offset's in-place advance is one of the plan's
// write-backs, so every call of a compiled function draws fresh numbers, and
// eager and traced runs draw the same stream: after manual_seed(s), a traced
// step and an eager step give the same dropout masks.
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"

namespace kiln {

using detail::here;

namespace {

constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default seed

struct Generator {
  Tensor key, offset;  // 0-d int64 on the generator's device
};

std::mutex g_mu;
uint64_t g_seed = kDefaultSeed;
std::map<std::pair<int, int>, Generator>& generators() {
  static std::map<std::pair<int, int>, Generator> g;
  return g;
}

// The device's generator, made on first use from the current seed. Made
// outside any trace (a trace would record its creation as graph constants).
Generator& generator_for(Device d) {
  auto& gens = generators();
  const auto id = std::make_pair(int(d.type), int(d.index));
  auto it = gens.find(id);
  if (it != gens.end()) return it->second;
  TraceScope outside(nullptr);
  NoGradGuard no_grad;
  Generator g;
  const TensorOptions o = TensorOptions(kInt64).device(d);
  g.key = full({}, Scalar(static_cast<long long>(g_seed)), o);
  g.offset = zeros({}, o);
  return gens.emplace(id, std::move(g)).first->second;
}

// `count` counters per element of `shape`: offset + count * i + j for draw j.
// Returns the first stream's uniforms and, for count 2, the second's.
std::pair<Tensor, Tensor> draw(const Shape& shape, Device d, int count, Loc l) {
  const SourceLoc loc = here(l);
  int64_t n;
  try {
    n = numel(shape);
  } catch (Error& e) {
    e.attach(loc);
    throw;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  Generator& g = generator_for(d);
  NoGradGuard no_grad;
  const TensorOptions o = TensorOptions(kInt64).device(d);
  Tensor base = arange(n, o, l).mul(Scalar(count), l).add(g.offset, 1, l).reshape(shape, l);
  auto uniform = [&](const Tensor& counter) {
    return detail::apply(OpKind::philox, {g.key, counter}, {}, loc);
  };
  std::pair<Tensor, Tensor> r{uniform(base), Tensor()};
  if (count == 2) r.second = uniform(base.add(Scalar(1), l));
  g.offset.add_(Scalar(static_cast<long long>(n * count)), l);
  return r;
}

DType float_dtype(const TensorOptions& o, const char* op, SourceLoc loc) {
  const DType t = o.has_dtype_ ? o.dtype_ : DType::f32;
  if (!is_floating(t))
    throw Error(std::string(op) + ": expected a floating dtype, got " + dtype_name(t), loc);
  return t;
}

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

}  // namespace

Tensor rand(Shape shape, TensorOptions o, Loc l) {
  const SourceLoc loc = here(l);
  const DType t = float_dtype(o, "rand", loc);
  Tensor u = draw(shape, o.device_, 1, l).first;
  return finish(u.to(t, l), o);
}

// Box-Muller on the pair of uniforms (u1, u2) at counters 2i and 2i + 1:
// sqrt(-2 log(1 - u1)) cos(2 pi u2); 1 - u1 is in (0, 1], so the log is finite.
Tensor randn(Shape shape, TensorOptions o, Loc l) {
  const SourceLoc loc = here(l);
  const DType t = float_dtype(o, "randn", loc);
  auto [u1, u2] = draw(shape, o.device_, 2, l);
  NoGradGuard no_grad;
  Tensor r = u1.neg(l).log1p(l).mul(Scalar(-2.0), l).sqrt(l);
  Tensor z = r.mul(u2.mul(Scalar(2 * std::numbers::pi), l).cos(l), l);
  return finish(z.to(t, l), o);
}

Tensor randint(int64_t low, int64_t high, Shape shape, TensorOptions o, Loc l) {
  const SourceLoc loc = here(l);
  if (high <= low)
    throw Error("randint: expected low < high, got [" + std::to_string(low) + ", " +
                    std::to_string(high) + ")",
                loc);
  if (high - low > (int64_t(1) << 24))
    throw Error("randint: a range of " + std::to_string(high - low) +
                    " values is wider than the generator's 24 random bits per draw (2^24)",
                loc);
  const DType t = o.has_dtype_ ? o.dtype_ : DType::i64;
  Tensor u = draw(shape, o.device_, 1, l).first;
  NoGradGuard no_grad;
  // floor(u * range) is in [0, range) since u < 1 has 24 bits and range <= 2^24.
  Tensor v = u.to(kFloat64, l).mul(Scalar(static_cast<double>(high - low)), l).floor(l);
  return v.to(kInt64, l).add(Scalar(static_cast<long long>(low)), l).to(t, l);
}
Tensor randint(int64_t high, Shape shape, TensorOptions o, Loc l) {
  return randint(0, high, std::move(shape), o, l);
}

Tensor rand_like(const Tensor& t, Loc l) {
  return rand(t.sizes(), TensorOptions(t.dtype()).device(t.device()), l);
}
Tensor randn_like(const Tensor& t, Loc l) {
  return randn(t.sizes(), TensorOptions(t.dtype()).device(t.device()), l);
}

void manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_seed = seed;
  TraceScope outside(nullptr);
  NoGradGuard no_grad;
  for (auto& [id, g] : generators()) {
    g.key.fill_(Scalar(static_cast<long long>(seed)));
    g.offset.zero_();
  }
}

namespace nn::functional {

Tensor dropout(const Tensor& x, double p, bool training, Loc l) {
  if (!(p >= 0 && p <= 1))
    throw Error("dropout: expected a probability in [0, 1], got " + std::to_string(p), here(l));
  if (!training || p == 0) return x;
  if (p == 1) return x.mul(Scalar(0.0), l);
  if (!is_floating(x.dtype()))
    throw Error("dropout: expected a floating tensor, got " + std::string(dtype_name(x.dtype())),
                here(l));
  Tensor keep = rand(x.sizes(), TensorOptions(kFloat32).device(x.device()), l).ge(Scalar(p), l);
  return where(keep, x.mul(Scalar(1.0 / (1.0 - p)), l), zeros({}, TensorOptions(x.dtype()).device(x.device()), l), l);
}

}  // namespace nn::functional

}  // namespace kiln
