// Random numbers that compile: generators (frontend/generator.h) hold a key
// (the seed) and an offset as two 0-d int64 tensors on their device, and every
// draw is the op table's `philox` on them. A draw of n elements of `count`
// counters each reads counters offset .. offset + count * n - 1 (element i uses
// offset + count * i + j for its draw j) and advances the offset in place.
//
// Draws are ordinary ops on those tensors, so the same code runs eagerly and
// inside a trace: traced, the key and offset are captured tensors (inputs of the
// compiled plan) and the offset's in-place advance is one of the plan's
// write-backs, so every call of a compiled function draws fresh numbers, and
// eager and traced runs draw the same stream: after manual_seed(s), a traced
// step and an eager step give the same dropout masks. Seeding and setting a
// state are in-place writes too, so inside a trace the plan repeats them.
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <random>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/random_internal.h"
#include "frontend/settings.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"

namespace kiln {

using detail::here;

struct Generator::Impl {
  Device device;
  Tensor key, offset;  // 0-d int64 on `device`
  std::mutex mu;       // draws and state changes, one at a time
};

namespace {

using DeviceId = std::pair<int, int>;
DeviceId device_id(Device d) {
  return {int(d.type), int(d.index)};
}

std::mutex g_mu;                 // the default generators, g_seed and pending()
uint64_t g_seed = kDefaultSeed;  // the seed of default generators made from now on
std::map<DeviceId, std::shared_ptr<Generator::Impl>>& defaults() {
  static std::map<DeviceId, std::shared_ptr<Generator::Impl>> g;
  return g;
}
// States set (set_default_rng_states) for default generators not made yet: the
// state, as a host int64 tensor [seed, offset], each starts from when made.
std::map<DeviceId, Tensor>& pending() {
  static std::map<DeviceId, Tensor> p;
  return p;
}

Scalar as_scalar(uint64_t v) {
  return Scalar(static_cast<long long>(v));
}

std::shared_ptr<Generator::Impl> make_impl(Device d, uint64_t seed, Loc l) {
  auto g = std::make_shared<Generator::Impl>();
  NoGradGuard no_grad;
  const TensorOptions o = TensorOptions(kInt64).device(d);
  g->device = d;
  g->key = full({}, as_scalar(seed), o, l);
  g->offset = zeros({}, o, l);
  return g;
}

// The device's default generator, made on first use from the current seed.
// Made outside any trace (a trace would record its creation as graph constants).
std::shared_ptr<Generator::Impl> default_impl(Device d) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& gens = defaults();
  const DeviceId id = device_id(d);
  auto it = gens.find(id);
  if (it != gens.end()) return it->second;
  TraceScope outside(nullptr);
  auto g = make_impl(d, g_seed, Loc::current());
  if (auto p = pending().find(id); p != pending().end()) {
    Generator(g).set_state(p->second);
    pending().erase(p);
  }
  return gens.emplace(id, std::move(g)).first->second;
}

// An error for `what` inside a traced function, whose effect a plan would not
// repeat at every call.
void check_outside_trace(const char* what, const char* hint, Loc l) {
  if (current_trace())
    throw Error(std::string(what) + " inside a traced function (expected it outside" + hint + ")",
                here(l));
}

// The state tensor check of set_state.
void check_state(const Tensor& state, SourceLoc loc) {
  const std::string want =
      "set_state: expected an int64 tensor of shape [2] (seed, offset), as get_state() returns; "
      "got ";
  if (!state.defined()) throw Error(want + "an undefined tensor", loc);
  if (state.dtype() != kInt64 || state.sizes() != Shape{2})
    throw Error(want + dtype_name(state.dtype()) + shape_str(state.sizes()), loc);
}

// The generator a draw on device `d` uses: `gen` (which must be on `d`) or the
// device's default one.
Generator resolve(const std::optional<Generator>& gen, Device d, const char* op, SourceLoc loc) {
  if (!gen) return Generator(default_impl(d));
  if (gen->device() != d)
    throw Error(std::string(op) + ": the generator is on " + gen->device().str() +
                    ", the result on " + d.str() + " (expected a generator of the result's device)",
                loc);
  return *gen;
}

// `count` draws per element of `shape` (philox with `attrs`), from counters
// offset + count * i + j for draw j of element i, i counted from `first`; g.mu
// held, the offset not advanced.
std::vector<Tensor> draw_locked(Generator::Impl& g, const Shape& shape, int64_t n, int count,
                                const Attrs& attrs, Loc l, int64_t first = 0) {
  const TensorOptions o = TensorOptions(kInt64).device(g.device);
  Tensor base = (first == 0 ? arange(n, o, l) : arange(first, first + n, 1, o, l))
                    .mul(Scalar(count), l)
                    .add(g.offset, 1, l)
                    .reshape(shape, l);
  std::vector<Tensor> out;
  for (int j = 0; j < count; ++j) {
    Tensor counter = j == 0 ? base : base.add(Scalar(j), l);
    out.push_back(detail::apply(OpKind::philox, {g.key, counter}, attrs, here(l)));
  }
  return out;
}

void advance(Generator::Impl& g, int64_t n, int count, Loc l) {
  g.offset.add_(as_scalar(static_cast<uint64_t>(n) * static_cast<uint64_t>(count)), l);
}

int64_t checked_numel(const Shape& shape, Loc l) {
  try {
    return numel(shape);
  } catch (Error& e) {
    e.attach(here(l));
    throw;
  }
}

// `count` draws per element of `shape`; advances the offset.
std::vector<Tensor> draw(Generator::Impl& g, const Shape& shape, int count, const Attrs& attrs,
                         Loc l) {
  const int64_t n = checked_numel(shape, l);
  NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(g.mu);
  std::vector<Tensor> out = draw_locked(g, shape, n, count, attrs, l);
  advance(g, n, count, l);
  return out;
}

// Numbers made by `make` from `count` draws per element (make(draws) -> values
// of the draws' shape), of dtype t. Eagerly, a large result is made a chunk of
// elements at a time straight into it: element i's counters do not depend on
// the chunk, and every chunk has at least kChunk elements (so each eager op
// takes the kernel it takes for the whole), so the numbers are the same while
// the temporaries (int64 counters, uniforms, Box-Muller's steps) are a chunk's
// size, not several times the result's. Traced, one draw of the whole shape.
template <class F>
Tensor make_draws(Generator::Impl& g, const Shape& shape, int count, const Attrs& attrs, DType t,
                  F make, Loc l) {
  constexpr int64_t kChunk = int64_t(1) << 15;  // >= eager_kernel_min_elements
  const int64_t n = checked_numel(shape, l);
  if (current_trace() || n < 2 * kChunk || g.key.impl()->symbolic() ||
      kChunk < settings().eager_kernel_min_elements)
    return make(draw(g, shape, count, attrs, l));
  NoGradGuard no_grad;
  Tensor out = empty({n}, TensorOptions(t).device(g.device), l);
  std::lock_guard<std::mutex> lock(g.mu);
  for (int64_t first = 0; first < n; first += kChunk) {
    const int64_t m = n - first < 2 * kChunk ? n - first : kChunk;  // the last takes the rest
    out.narrow(0, first, m, l).copy_(make(draw_locked(g, {m}, m, count, attrs, l, first)), l);
    if (m != kChunk) break;
  }
  advance(g, n, count, l);
  return out.reshape(shape, l);
}

// philox's attributes for a uniform draw of floating dtype t.
Attrs uniform_attrs(DType t) {
  return t == DType::f64 ? Attrs{{AttrKey::dtype, DType::f64}} : Attrs{};
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

// randint's values [low, high - 1] must be values of dtype t (exact ones, for floats).
void check_randint_range(int64_t low, int64_t high, DType t, SourceLoc loc) {
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  switch (t) {
    case DType::b8:
      lo = 0, hi = 1;
      break;
    case DType::u8:
      lo = 0, hi = UINT8_MAX;
      break;
    case DType::i8:
      lo = INT8_MIN, hi = INT8_MAX;
      break;
    case DType::i16:
      lo = INT16_MIN, hi = INT16_MAX;
      break;
    case DType::i32:
      lo = INT32_MIN, hi = INT32_MAX;
      break;
    case DType::f32:
      lo = -(int64_t(1) << 24), hi = int64_t(1) << 24;
      break;
    case DType::f64:
      lo = -(int64_t(1) << 53), hi = int64_t(1) << 53;
      break;
    case DType::i64:
      break;
  }
  if (low < lo || high - 1 > hi)
    throw Error("randint: the range [" + std::to_string(low) + ", " + std::to_string(high) +
                    ") does not fit dtype " + dtype_name(t) + " (expected values from " +
                    std::to_string(lo) + " to " + std::to_string(hi) + ")",
                loc);
}

}  // namespace

// ---- Generator ----

Generator::Generator(Device device, Loc l) : impl_(make_impl(device, kDefaultSeed, l)) {}

Generator& Generator::manual_seed(uint64_t seed, Loc l) {
  NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->key.fill_(as_scalar(seed), l);
  impl_->offset.zero_(l);
  return *this;
}

uint64_t Generator::current_seed(Loc l) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<uint64_t>(impl_->key.item<int64_t>(l));
}

uint64_t Generator::seed(Loc l) {
  std::random_device rd;
  const uint64_t s = uint64_t(rd()) << 32 | rd();
  manual_seed(s, l);
  return s;
}

void Generator::set_offset(uint64_t offset, Loc l) {
  NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->offset.fill_(as_scalar(offset), l);
}

uint64_t Generator::get_offset(Loc l) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<uint64_t>(impl_->offset.item<int64_t>(l));
}

Tensor Generator::get_state(Loc l) const {
  NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(impl_->mu);
  return stack({impl_->key, impl_->offset}, 0, l).to(Device(kCPU), l);
}

void Generator::set_state(const Tensor& state, Loc l) {
  check_state(state, here(l));
  NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(impl_->mu);
  Tensor s = state.to(impl_->device, l);
  impl_->key.copy_(s.select(0, 0, l), l);
  impl_->offset.copy_(s.select(0, 1, l), l);
}

Device Generator::device() const {
  return impl_->device;
}

Generator Generator::clone(Loc l) const {
  auto c = std::make_shared<Impl>();
  NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(impl_->mu);
  c->device = impl_->device;
  c->key = impl_->key.clone(l);
  c->offset = impl_->offset.clone(l);
  return Generator(std::move(c));
}

Generator default_generator(Device device) {
  return Generator(default_impl(device));
}

Tensor get_rng_state(Device device, Loc l) {
  return default_generator(device).get_state(l);
}

void set_rng_state(const Tensor& state, Device device, Loc l) {
  default_generator(device).set_state(state, l);
}

void manual_seed(uint64_t seed, Loc l) {
  check_outside_trace("manual_seed",
                      "; to seed at every call, seed a Generator and draw from it: "
                      "g.manual_seed(s), rand(shape, g)",
                      l);
  std::lock_guard<std::mutex> lock(g_mu);
  g_seed = seed;
  pending().clear();
  NoGradGuard no_grad;
  for (auto& [id, g] : defaults()) Generator(g).manual_seed(seed, l);
}

detail::DefaultRngStates detail::default_rng_states() {
  check_outside_trace("reading the default generators' states", "", Loc::current());
  std::lock_guard<std::mutex> lock(g_mu);
  DefaultRngStates s;
  s.seed = g_seed;
  for (auto& [id, g] : defaults()) s.states.emplace_back(g->device, Generator(g).get_state());
  for (auto& [id, state] : pending())
    s.states.emplace_back(Device(DeviceType(id.first), id.second), state.clone());
  return s;
}

void detail::set_default_rng_states(const DefaultRngStates& s, Loc l) {
  check_outside_trace("setting the default generators' states", "", l);
  for (const auto& [device, state] : s.states) check_state(state, here(l));
  std::lock_guard<std::mutex> lock(g_mu);
  g_seed = s.seed;
  pending().clear();
  std::map<DeviceId, const Tensor*> given;
  for (const auto& [device, state] : s.states) given[device_id(device)] = &state;
  for (auto& [id, g] : defaults()) {
    auto it = given.find(id);
    if (it == given.end()) {
      Generator(g).manual_seed(s.seed, l);
    } else {
      Generator(g).set_state(*it->second, l);
      given.erase(it);
    }
  }
  for (const auto& [id, state] : given) pending()[id] = state->cpu(l).clone(l);
}

// ---- draws ----

Tensor detail::random_bits(const Shape& shape, const std::optional<Generator>& gen, Device d,
                           const char* op, Loc l) {
  Generator g = resolve(gen, d, op, here(l));
  return make_draws(
      g.impl(), shape, 1, Attrs{{AttrKey::dtype, DType::i64}}, DType::i64,
      [](std::vector<Tensor> u) { return u[0]; }, l);
}

Tensor rand(Shape shape, std::optional<Generator> gen, TensorOptions o, Loc l) {
  const SourceLoc loc = here(l);
  const DType t = float_dtype(o, "rand", loc);
  Generator g = resolve(gen, o.device_, "rand", loc);
  return finish(
      make_draws(
          g.impl(), shape, 1, uniform_attrs(t), t, [](std::vector<Tensor> u) { return u[0]; }, l),
      o);
}
Tensor rand(Shape shape, TensorOptions o, Loc l) {
  return rand(std::move(shape), std::nullopt, o, l);
}

// Box-Muller on the pair of uniforms (u1, u2) at counters 2i and 2i + 1, in the
// result's dtype: sqrt(-2 log(1 - u1)) cos(2 pi u2); 1 - u1 is in (0, 1], so the
// log is finite.
Tensor randn(Shape shape, std::optional<Generator> gen, TensorOptions o, Loc l) {
  const SourceLoc loc = here(l);
  const DType t = float_dtype(o, "randn", loc);
  Generator g = resolve(gen, o.device_, "randn", loc);
  Tensor z = make_draws(
      g.impl(), shape, 2, uniform_attrs(t), t,
      [&](std::vector<Tensor> u) {
        NoGradGuard no_grad;
        Tensor r = u[0].neg(l).log1p(l).mul(Scalar(-2.0), l).sqrt(l);
        return r.mul(u[1].mul(Scalar(2 * std::numbers::pi), l).cos(l), l);
      },
      l);
  return finish(z, o);
}
Tensor randn(Shape shape, TensorOptions o, Loc l) {
  return randn(std::move(shape), std::nullopt, o, l);
}

Tensor randint(int64_t low, int64_t high, Shape shape, std::optional<Generator> gen,
               TensorOptions o, Loc l) {
  const SourceLoc loc = here(l);
  if (high <= low)
    throw Error("randint: expected low < high, got [" + std::to_string(low) + ", " +
                    std::to_string(high) + ")",
                loc);
  const DType t = o.has_dtype_ ? o.dtype_ : DType::i64;
  check_randint_range(low, high, t, loc);
  Generator g = resolve(gen, o.device_, "randint", loc);
  const Attrs attrs{{AttrKey::dtype, DType::i64}, {AttrKey::low, low}, {AttrKey::high, high}};
  Tensor v = make_draws(
      g.impl(), shape, 1, attrs, DType::i64, [](std::vector<Tensor> u) { return u[0]; }, l);
  NoGradGuard no_grad;
  return v.to(t, l);
}
Tensor randint(int64_t low, int64_t high, Shape shape, TensorOptions o, Loc l) {
  return randint(low, high, std::move(shape), std::nullopt, o, l);
}
Tensor randint(int64_t high, Shape shape, std::optional<Generator> gen, TensorOptions o, Loc l) {
  return randint(0, high, std::move(shape), std::move(gen), o, l);
}
Tensor randint(int64_t high, Shape shape, TensorOptions o, Loc l) {
  return randint(0, high, std::move(shape), std::nullopt, o, l);
}

Tensor rand_like(const Tensor& t, Loc l) {
  return rand(t.sizes(), TensorOptions(t.dtype()).device(t.device()), l);
}
Tensor randn_like(const Tensor& t, Loc l) {
  return randn(t.sizes(), TensorOptions(t.dtype()).device(t.device()), l);
}

// u < p for a uniform u of p's dtype: 1 with probability p (p <= 0 never, p >= 1
// always).
Tensor bernoulli(const Tensor& p, std::optional<Generator> gen, Loc l) {
  if (!is_floating(p.dtype()))
    throw Error("bernoulli: expected a floating tensor of probabilities, got " +
                    std::string(dtype_name(p.dtype())),
                here(l));
  Tensor u = rand(p.sizes(), std::move(gen), TensorOptions(p.dtype()).device(p.device()), l);
  NoGradGuard no_grad;
  return u.lt(p.detach(), l).to(p.dtype(), l);
}

Tensor bernoulli(const Tensor& self, double p, std::optional<Generator> gen, Loc l) {
  if (!(p >= 0 && p <= 1))
    throw Error("bernoulli: expected a probability in [0, 1], got " + std::to_string(p), here(l));
  const DType ut = self.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor u = rand(self.sizes(), std::move(gen), TensorOptions(ut).device(self.device()), l);
  NoGradGuard no_grad;
  return u.lt(Scalar(p), l).to(self.dtype(), l);
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
  return where(keep, x.mul(Scalar(1.0 / (1.0 - p)), l),
               zeros({}, TensorOptions(x.dtype()).device(x.device()), l), l);
}

}  // namespace nn::functional

}  // namespace kiln
