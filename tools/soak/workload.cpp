// The soak's workloads: eager and traced training side by side (workload.h).
#include "tools/soak/workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace kiln::soak {

namespace {

namespace F = nn::functional;

enum class Arch { Mlp, Conv };

const char* arch_name(Arch a) {
  return a == Arch::Mlp ? "mlp" : "conv";
}

constexpr int64_t kClasses = 6;
constexpr double kDropout = 0.2;
constexpr double kLr = 1e-3;

// Inverted dropout drawing from `gen`: traced, the generator's state is a
// captured tensor the plan advances, so both models draw the same masks.
Tensor dropout(const Tensor& h, Generator& gen) {
  Tensor keep = (rand(h.sizes(), gen, TensorOptions(h.dtype())) >= kDropout).to(h.dtype());
  return h * keep * (1.0 / (1.0 - kDropout));
}

// A net as plain leaf tensors: an MLP (20-48-32-6, ReLU, dropout, tanh) or a
// small conv net (1x10x10 -> conv 6x3x3, ReLU, max-pool 2, dropout -> 6).
struct Net {
  Arch arch;
  DType dtype;
  std::vector<Tensor> params;

  int64_t features() const { return arch == Arch::Mlp ? 20 : 100; }
  Shape input_shape(int64_t n) const {
    return arch == Arch::Mlp ? Shape{n, 20} : Shape{n, 1, 10, 10};
  }
  Tensor forward(const Tensor& x, Generator& gen) const {
    const auto& p = params;
    if (arch == Arch::Mlp) {
      Tensor h = (x.matmul(p[0]) + p[1]).relu();
      h = dropout(h, gen);
      h = (h.matmul(p[2]) + p[3]).tanh();
      return h.matmul(p[4]) + p[5];
    }
    Tensor h = conv2d(x, p[0], p[1], 1, 1).relu();
    h = dropout(max_pool2d(h, 2), gen).flatten(1);
    return h.matmul(p[2]) + p[3];
  }
  Net copy() const {
    Net n{arch, dtype, {}};
    for (const Tensor& t : params) n.params.push_back(t.detach().clone().requires_grad_());
    return n;
  }
};

Net make_net(Arch arch, DType dt, Generator& g) {
  const TensorOptions o(dt);
  auto weight = [&](Shape s, double fan_in) { return randn(s, g, o) * (1.0 / std::sqrt(fan_in)); };
  auto bias = [&](int64_t n) { return randn({n}, g, o) * 0.1; };
  Net n{arch, dt, {}};
  if (arch == Arch::Mlp)
    n.params = {weight({20, 48}, 20),       bias(48),      weight({48, 32}, 48), bias(32),
                weight({32, kClasses}, 32), bias(kClasses)};
  else
    n.params = {weight({6, 1, 3, 3}, 9), bias(6), weight({150, kClasses}, 150), bias(kClasses)};
  for (Tensor& t : n.params) t = t.detach().requires_grad_();
  return n;
}

Tensor train_step(const Net& net, optim::Adam& opt, Generator& gen, const Tensor& x,
                  const Tensor& y) {
  opt.zero_grad();
  Tensor loss = F::cross_entropy(net.forward(x, gen), y);
  loss.backward();
  opt.step();
  return loss;
}

// The shared function's body: traced by make_shared_fn, run eagerly to compare.
Tensor shared_body(const Tensor& x, const Tensor& w, const Tensor& b) {
  return ((x.matmul(w) + b).tanh() * 0.5).exp().sum(1);
}

// Largest relative difference of traced against eager, |t - e| / max(|e|, atol / rtol);
// an element off by more than atol + rtol |e| fails the run, naming it.
double compare(const std::vector<double>& t, const std::vector<double>& e, double rtol, double atol,
               const std::string& what, Counters& c) {
  if (t.size() != e.size()) {
    c.fail(what + ": traced has " + std::to_string(t.size()) + " elements, eager " +
           std::to_string(e.size()));
    return INFINITY;
  }
  double worst = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const double d = std::abs(t[i] - e[i]);
    if (!(d <= atol + rtol * std::abs(e[i]))) {  // NaN fails too
      std::ostringstream os;
      os.precision(17);
      os << what << ": element " << i << " traced " << t[i] << " eager " << e[i] << " (tolerance "
         << atol << " + " << rtol << " |eager|)";
      c.fail(os.str());
    }
    worst = std::max(worst, d / std::max(std::abs(e[i]), atol / rtol));
  }
  return worst;
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Round {
 public:
  Round(const WorkerOptions& o, int64_t index, SharedFn& shared, Counters& c)
      : o_(o), index_(index), shared_(shared), c_(c) {
    // Each worker goes through the four kinds (MLP/conv, f32/f64) in turn.
    arch_ = (index + o.id) % 2 == 0 ? Arch::Mlp : Arch::Conv;
    dtype_ = ((index / 2) + o.id) % 2 == 0 ? kFloat32 : kFloat64;
    rng_.seed(mix(o.seed, mix(uint64_t(o.id), uint64_t(index))));
  }

  /// Where the round is: worker, round, workload, step and batch.
  const std::string& where() const { return where_; }

  void run() {
    where_ = context(0, 0);
    Generator init;
    init.manual_seed(rng_());
    Net eager = make_net(arch_, dtype_, init);
    Net traced = eager.copy();
    optim::Adam opt_e(eager.params, kLr), opt_t(traced.params, kLr);
    Generator drop_e, drop_t;
    const uint64_t drop_seed = rng_();
    drop_e.manual_seed(drop_seed);
    drop_t.manual_seed(drop_seed);

    // The data: inputs and the labels a random linear teacher gives them.
    const int64_t n = 300 + int64_t(rng_() % 100);
    const TensorOptions opts(dtype_);
    Tensor x = randn(eager.input_shape(n), init, opts);
    Tensor teacher = randn({eager.features(), kClasses}, init, opts);
    Tensor y = x.reshape({n, -1}).matmul(teacher).argmax(1);
    Tensor sw = randn({eager.features(), 8}, init, opts) * 0.3, sb = randn({8}, init, opts);

    auto step = jit([&](Tensor xb, Tensor yb) { return train_step(traced, opt_t, drop_t, xb, yb); },
                    "soak_step");
    int64_t done = 0;
    while (done < o_.steps_per_round && !c_.stop.load()) {
      const int64_t bs = batch_size();
      for (int64_t start = 0; start < n && done < o_.steps_per_round && !c_.stop.load();
           start += bs) {
        const int64_t len = std::min(bs, n - start);
        where_ = context(done, len);
        Tensor xb = x.narrow(0, start, len), yb = y.narrow(0, start, len);
        const double lt = step(xb, yb).item<double>();
        c_.steps_traced++;
        const double le = train_step(eager, opt_e, drop_e, xb, yb).item<double>();
        c_.steps_eager++;
        check_loss(lt, le);
        call_shared(xb.reshape({len, -1}), sw, sb);
        if (++done % o_.check_every == 0)
          check_and_reset(eager, traced, opt_e, opt_t, drop_e, drop_t);
      }
    }
    // Most rounds wait for their background compiles and count their figures; every
    // fourth destroys its traced step at once, while its compile may still run.
    if (index_ % 4 != 3) {
      wait_for_background_compiles();
      add_stats(step.stats());
    } else {
      c_.rounds_unwaited++;
    }
    c_.rounds++;
  }

 private:
  int64_t batch_size() {
    static constexpr int64_t kCommon[] = {16, 32, 37, 48, 50, 64, 100, 128};
    if (rng_() % 10 < 7) return kCommon[rng_() % std::size(kCommon)];
    return 1 + int64_t(rng_() % 130);
  }

  std::string context(int64_t step, int64_t batch) const {
    return "worker " + std::to_string(o_.id) + " round " + std::to_string(index_) + " (" +
           arch_name(arch_) + " " + dtype_name(dtype_) + ") step " + std::to_string(step) +
           " batch " + std::to_string(batch);
  }

  void check_loss(double lt, double le) {
    const bool f64 = dtype_ == kFloat64;
    const Tolerances& t = o_.tol;
    const double d = compare({lt}, {le}, f64 ? t.loss_rtol_f64 : t.loss_rtol_f32,
                             f64 ? t.loss_atol_f64 : t.loss_atol_f32, where_ + ": loss", c_);
    (f64 ? c_.loss_f64 : c_.loss_f32).update(d);
  }

  void call_shared(const Tensor& xf, const Tensor& w, const Tensor& b) {
    const std::vector<double> t = shared_(xf, w, b).to_vector<double>();
    c_.shared_calls++;
    const std::vector<double> e = shared_body(xf, w, b).to_vector<double>();
    const bool f64 = dtype_ == kFloat64;
    const Tolerances& tol = o_.tol;
    const double d = compare(t, e, f64 ? tol.shared_rtol_f64 : tol.shared_rtol_f32,
                             f64 ? tol.shared_atol_f64 : tol.shared_atol_f32,
                             where_ + ": the shared function", c_);
    (f64 ? c_.shared_f64 : c_.shared_f32).update(d);
  }

  // f64: parameters, gradients and Adam's state equal eager's to 1e-9; both
  // dropout streams at the same offset. Then the traced model takes the eager
  // one's parameters and Adam state, so rounding differences never compound.
  void check_and_reset(Net& eager, Net& traced, optim::Adam& opt_e, optim::Adam& opt_t,
                       Generator& drop_e, Generator& drop_t) {
    c_.checks++;
    if (drop_t.get_offset() != drop_e.get_offset())
      c_.fail(where_ + ": the traced dropout stream is at offset " +
              std::to_string(drop_t.get_offset()) + ", eager's at " +
              std::to_string(drop_e.get_offset()));
    std::vector<Tensor> se = opt_e.state(), st = opt_t.state();
    if (dtype_ == kFloat64) {
      const Tolerances& t = o_.tol;
      for (size_t i = 0; i < eager.params.size(); ++i) {
        const std::string name = where_ + ": parameter " + std::to_string(i);
        c_.state_f64.update(compare(traced.params[i].to_vector<double>(),
                                    eager.params[i].to_vector<double>(), t.state_rtol_f64,
                                    t.state_atol_f64, name, c_));
        c_.state_f64.update(compare(traced.params[i].grad().to_vector<double>(),
                                    eager.params[i].grad().to_vector<double>(), t.state_rtol_f64,
                                    t.state_atol_f64, name + "'s gradient", c_));
      }
      for (size_t i = 0; i < se.size(); ++i)
        c_.state_f64.update(compare(st[i].to_vector<double>(), se[i].to_vector<double>(),
                                    t.state_rtol_f64, t.state_atol_f64,
                                    where_ + ": Adam state " + std::to_string(i), c_));
    }
    NoGradGuard no_grad;
    for (size_t i = 0; i < eager.params.size(); ++i) traced.params[i].copy_(eager.params[i]);
    for (size_t i = 0; i < se.size(); ++i) st[i].copy_(se[i]);
  }

  void add_stats(const TraceStats& s) {
    c_.misses += s.misses;
    c_.background_compiles += s.background_compiles;
    c_.calls_while_compiling += s.calls_while_compiling;
    c_.kernels += s.kernels;
    c_.kernels_from_disk += s.kernels_from_disk;
    c_.kernels_reused += s.kernels_reused;
    c_.kernels_templated += s.kernels_templated;
    c_.kernels_llvm += s.kernels_compiled;
  }

  const WorkerOptions& o_;
  int64_t index_;
  SharedFn& shared_;
  Counters& c_;
  Arch arch_;
  DType dtype_;
  std::mt19937_64 rng_;
  std::string where_;
};

}  // namespace

void Counters::fail(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.empty()) failure_ = what;
  }
  failed_ = true;
  stop = true;
}

std::string Counters::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

SharedFn make_shared_fn() {
  SharedFn f("soak_shared", [](Tensor x, Tensor w, Tensor b) { return shared_body(x, w, b); });
  f.set_cache_size(4);  // fewer than the sizes and dtypes it sees: evictions, recompiles
  return f;
}

void run_worker(const WorkerOptions& o, SharedFn& shared, Counters& c) {
  for (int64_t r = 0; !c.stop.load(); ++r) {
    Round round(o, r, shared, c);
    try {
      round.run();
    } catch (const std::exception& e) {
      c.fail(round.where() + ": unexpected exception: " + e.what());
    }
  }
}

}  // namespace kiln::soak
