// Tracing JIT: KILN_TRACE(Ret, name, params...) { body } defines a callable
// `name`; jit(lambda) does the same for lambdas. The first call for an input
// signature (dtype, shape, device and requires_grad of each tensor argument,
// the value of each plain-number argument) traces the body with symbolic
// tensors into an IR graph, runs the pass pipeline, compiles, and caches the
// plan; later calls with that signature run the cached plan.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "codegen/compile_stats.h"
#include "frontend/tensor.h"
#include "ir/graph.h"

namespace kiln {

struct CompileOptions;
struct DynamicDim;
class DynamicDims;

/// Counters and timings of one traced function (name.stats()); the compile
/// figures (compile_ms, kernels, ...) are codegen/compile_stats.h's.
struct TraceStats : CompileStats {
  int64_t calls = 0, hits = 0, misses = 0, evictions = 0, eager_calls = 0;
  /// Plans compiled in the background (new sizes of a dynamic dimension), and the
  /// calls that ran the body eagerly meanwhile (settings().background_compile).
  int64_t background_compiles = 0, calls_while_compiling = 0;
  /// Calls at a new size that ran the body eagerly before the size compiled
  /// (settings().compile_after): they are not misses, nothing was traced.
  int64_t calls_before_compiling = 0;
  /// The reasons of the most recent misses ("first call", "arg 0: shape [64,1000] ->
  /// [32,1000]"), oldest first: at most kRecent, so that a long-lived function whose
  /// shapes keep changing stays flat (`misses` counts them all).
  std::vector<std::string> miss_reasons;
  static constexpr size_t kRecent = 64;
  double trace_ms = 0;
  /// The dynamic dimensions, marked or seen changing ("arg 0 dim 0").
  std::vector<std::string> dynamic_dims;
  std::string str() const;
};

/// Global switches (each also has an environment variable; the API call wins).
void set_jit_enabled(bool on);   // KILN_JIT=0 runs traced functions eagerly
bool jit_enabled();
void set_fusion_enabled(bool on);  // KILN_FUSION=0: one kernel per op
bool fusion_enabled();
void set_check_enabled(bool on);   // KILN_CHECK=1: compare with eager on each new signature
bool check_enabled();
/// Where compiled kernels are cached on disk (KILN_CACHE_DIR; default
/// $XDG_CACHE_HOME/kiln or ~/.cache/kiln; "" or "off" disables the disk cache).
void set_cache_dir(std::string dir);
std::string cache_dir();
/// Returns when no plan is compiling in the background any more (a new size of a
/// dynamic dimension compiles there while its calls run eagerly): for tests,
/// benchmarks, and code about to time its steps.
void wait_for_background_compiles();

namespace detail {

/// A traced call's inputs after flattening: tensors and plain numbers, in order.
struct TraceArgs {
  std::vector<Tensor> tensors;
  std::vector<double> numbers;
  std::vector<bool> is_tensor;  // per parameter
};

/// The untyped core of a traced function: signature cache, tracing, compiling, running.
class TracedCore {
 public:
  using Body = std::function<std::vector<Tensor>(const TraceArgs&)>;
  TracedCore(std::string name, SourceLoc where, Body body);
  ~TracedCore();

  std::vector<Tensor> call(const TraceArgs& args);
  Graph graph(const TraceArgs& args, bool optimized);
  void dump(const std::string& dir, const TraceArgs& args);
  std::vector<Tensor> profile(const std::string& path, const TraceArgs& args);
  void save(const std::string& path, const TraceArgs& args);
  const TraceStats& stats() const;
  void set_cache_size(size_t n);
  /// Dimension `dim` of argument `arg` (the parameter's position; `is_tensor`:
  /// per parameter, whether it is a tensor) takes any size.
  void mark_dynamic(size_t arg, int64_t dim, const std::vector<bool>& is_tensor);
  void set_fusion(int on) { fusion_override_ = on; }  // -1 follows the global switch
  const std::string& name() const { return name_; }
  struct Signature;  // a call's cache key (frontend/jit_entry.h)
  struct Entry;      // one cached signature (frontend/jit_entry.h)
  struct StatsCell;  // the stats and what adds to them (frontend/jit_entry.h)

 private:
  /// The entry for these arguments: a cached one, or one built now. When another
  /// thread is building the same signature, waits for it instead of building twice.
  /// `*eagerly`: a new size that runs eagerly before it compiles
  /// (settings().compile_after); the entry returned is then the most recent one,
  /// whose gradient buffers the eager call keeps.
  std::shared_ptr<Entry> lookup(const TraceArgs& args, bool* eagerly);
  /// Traces the body at a call's signature: an entry whose plan is not compiled
  /// yet (`record`: with the graph as traced and the partition's text, for dumps).
  std::unique_ptr<Entry> trace(const Signature& sig, bool record = false);
  CompileOptions entry_options(bool artifacts, bool dynamic) const;
  /// Traces and compiles. `dynamic`: CPU kernels become templates where sizes changed
  /// (CompileOptions::dynamic_sizes).
  std::unique_ptr<Entry> build(const Signature& sig, bool artifacts, bool dynamic = false);
  /// Before the first compile of a function with marked dimensions: traces it with
  /// each marked dimension one larger and remembers its kernels, so that the first
  /// compile already makes templates. A body that cannot trace at that size only
  /// loses the head start.
  void probe(const Signature& sig, const std::vector<DynamicDim>& dims);
  /// A new signature against the most recent, `last` (under mu_): the dimensions
  /// whose size changed, when nothing else did, made dynamic; returns what to log.
  /// `*background`: whether it should compile in the background while its calls
  /// run eagerly (settings().background_compile): it differs from `last` only in
  /// sizes of dynamic dimensions, its graph may compile there
  /// (compiles_in_background, codegen/compile_queue.h), and its templates are not
  /// started yet (a dimension just became dynamic, or the size that made it dynamic
  /// ran eagerly), or an earlier background compile runs.
  std::string note_dynamic(const Signature& now, const Entry& last, bool* background);
  /// Whether a new size that would compile in the background compiles at this
  /// call, or runs eagerly untraced (settings().compile_after; counts the call).
  bool compiles_now(const Signature& sig);
  std::vector<Tensor> run(Entry& e, const TraceArgs& args);
  /// KILN_CHECK's run of a new signature (frontend/check.cpp): the body eagerly,
  /// then the same state restored and the plan run, and everything compared.
  std::vector<Tensor> checked_run(Entry& e, const TraceArgs& args);

  std::string name_;
  SourceLoc where_;
  Body body_;
  size_t cache_size_ = 8;
  int fusion_override_ = -1;
  uint64_t clock_ = 0;
  std::vector<std::shared_ptr<Entry>> entries_;  // shared: a call in progress keeps its entry
  /// Shared with the tape nodes of autograd calls, whose backward plan compiles on first use.
  std::shared_ptr<StatsCell> stats_;
  std::mutex mu_;                     // entries_, in_flight_, clock_ and the call counters
  std::condition_variable compiled_;  // an in-flight build finished
  std::vector<const Signature*> in_flight_;  // signatures some thread is building now
  std::unique_ptr<DynamicDims> dynamic_;  // under mu_ (codegen/dynamic_sizes.h)
  /// Whether a compile with the dynamic dimensions' templates has started: until
  /// then a new size would compile templates, not only reuse them (under mu_).
  bool templates_started_ = false;
  /// New sizes that ran eagerly, and how many times (settings().compile_after):
  /// the most recent few, forgotten once they compile (under mu_).
  std::vector<std::pair<Signature, int>> eager_sizes_;
};

template <class T>
void add_arg(TraceArgs& a, const T& v) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) {
    a.tensors.push_back(v);
    a.is_tensor.push_back(true);
  } else {
    static_assert(std::is_arithmetic_v<D>, "traced functions take Tensors and plain numbers");
    a.numbers.push_back(static_cast<double>(v));
    a.is_tensor.push_back(false);
  }
}

template <class R>
std::vector<Tensor> flatten_result(const R& r) {
  if constexpr (std::is_same_v<R, Tensor>) {
    return {r};
  } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
    return r;
  } else {
    return std::apply([](const auto&... t) { return std::vector<Tensor>{t...}; }, r);
  }
}

template <class R>
R unflatten_result(std::vector<Tensor> ts) {
  if constexpr (std::is_same_v<R, Tensor>) {
    return ts.at(0);
  } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
    return ts;
  } else {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return R{ts.at(I)...};
    }(std::make_index_sequence<std::tuple_size_v<R>>{});
  }
}

// Rebuilds the call's arguments from symbolic tensors and numbers.
template <class T>
T take_arg(const TraceArgs& a, size_t& ti, size_t& ni) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) {
    return a.tensors.at(ti++);
  } else {
    return static_cast<D>(a.numbers.at(ni++));
  }
}

// The signature of a std::function with its parameters taken by value.
template <class Fn>
struct DecayedSig;
template <class R, class... A>
struct DecayedSig<std::function<R(A...)>> {
  using type = R(std::decay_t<A>...);
};

}  // namespace detail

template <class Sig>
class Traced;

/// A traced function of Tensors and plain numbers returning a Tensor, a
/// std::vector<Tensor> or a std::tuple of Tensors.
template <class R, class... A>
class Traced<R(A...)> {
 public:
  Traced(std::string name, std::function<R(A...)> fn, Loc where = Loc::current())
      : core_(std::make_shared<detail::TracedCore>(
            std::move(name), SourceLoc::from(where),
            [fn](const detail::TraceArgs& a) {
              [[maybe_unused]] size_t ti = 0, ni = 0;  // unused by a function of no arguments
              // Braced init evaluates the arguments left to right.
              auto call = [&](auto&&... xs) { return fn(xs...); };
              return detail::flatten_result<R>(
                  std::apply(call, std::tuple<std::decay_t<A>...>{detail::take_arg<A>(a, ti, ni)...}));
            })) {}

  R operator()(A... args) const { return detail::unflatten_result<R>(core_->call(pack(args...))); }
  /// The IR the call compiles to (after the pass pipeline; `optimized=false`: as traced).
  Graph graph(A... args, bool optimized = true) const { return core_->graph(pack(args...), optimized); }
  /// Writes every dump artefact for this signature into `dir` (see README: KILN_DUMP).
  void dump(const std::string& dir, A... args) const { core_->dump(dir, pack(args...)); }
  /// Calls the function once with profiling on and writes what ran as a Chrome
  /// trace-event file at `path` (open it at https://ui.perfetto.dev or
  /// chrome://tracing): the trace and compile if the signature is new, the call,
  /// and one event per plan step (kernel, BLAS call, check, collective) with its
  /// bytes, flops, source lines and thread, each part of a kernel run on a pool
  /// thread under it (and the steps other threads ran meanwhile). Returns the
  /// call's result. See README: profiles.
  R profile(const std::string& path, A... args) const {
    return detail::unflatten_result<R>(core_->profile(path, pack(args...)));
  }
  /// Saves the graph for this signature with its parameters' current values, to be
  /// run without the code by kiln::load(path) or `kiln run` (see frontend/serialize.h).
  void save(const std::string& path, A... args) const { core_->save(path, pack(args...)); }
  const TraceStats& stats() const { return core_->stats(); }
  void set_cache_size(size_t n) const { core_->set_cache_size(n); }
  /// Dimension `dim` of tensor argument `arg` (its position among the parameters)
  /// changes between calls, as a batch dimension does: CPU kernels take it at run
  /// time, so a new size retraces but compiles no kernel (README: dynamic sizes).
  /// A dimension whose size changes between two calls becomes dynamic by itself.
  void mark_dynamic(size_t arg, int64_t dim) const {
    core_->mark_dynamic(arg, dim, {std::is_same_v<std::decay_t<A>, Tensor>...});
  }
  void set_fusion(bool on) const { core_->set_fusion(on ? 1 : 0); }
  const std::string& name() const { return core_->name(); }

 private:
  static detail::TraceArgs pack(const A&... args) {
    detail::TraceArgs t;
    (detail::add_arg(t, args), ...);
    return t;
  }
  std::shared_ptr<detail::TracedCore> core_;
};

/// Traces a lambda (or any callable with one operator()): `auto f = jit([&](Tensor x) {...});`.
template <class F>
auto jit(F f, std::string name = "lambda", Loc where = Loc::current()) {
  // std::function's deduction guide reads the call operator's signature.
  using Sig = typename detail::DecayedSig<decltype(std::function{f})>::type;
  return Traced<Sig>(std::move(name), std::function<Sig>(std::move(f)), where);
}

}  // namespace kiln

/// Defines a traced function `name` (a kiln::Traced object) with the given
/// return type and parameters; the block that follows is its body.
#define KILN_TRACE(Ret, name, ...)                                                        \
  Ret name##_kiln_traced_body(__VA_ARGS__);                                               \
  inline const ::kiln::Traced<Ret(__VA_ARGS__)> name{#name, &name##_kiln_traced_body};   \
  Ret name##_kiln_traced_body(__VA_ARGS__)
