// The traced-function core: the signature cache (its keys, miss reasons and
// guards are jit_signature.cpp's), tracing into a graph, compiling to a plan,
// running it, KILN_CHECK comparison.
#include "frontend/jit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <sstream>
#include <utility>

#include "codegen/backend.h"
#include "codegen/compile.h"
#include "codegen/compile_queue.h"
#include "codegen/dynamic_sizes.h"
#include "frontend/alias.h"
#include "frontend/autograd.h"
#include "frontend/device_ops.h"
#include "frontend/dump.h"
#include "frontend/function.h"
#include "frontend/jit_entry.h"
#include "frontend/run_plan.h"
#include "frontend/serialize.h"
#include "frontend/settings.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "passes/pipeline.h"
#include "runtime/binary_io.h"
#include "runtime/profile.h"
#include "runtime/scope_exit.h"

namespace kiln {

std::string TraceStats::str() const {
  std::ostringstream os;
  os << "calls " << calls << ", cache hits " << hits << ", misses " << misses;
  if (evictions) os << ", evictions " << evictions;
  if (eager_calls) os << ", eager calls " << eager_calls;
  if (background_compiles)
    os << ", background compiles " << background_compiles << " (" << calls_while_compiling
       << " calls ran eagerly meanwhile)";
  if (calls_before_compiling)
    os << ", " << calls_before_compiling << " calls at new sizes ran eagerly before compiling";
  os << ", trace " << trace_ms << " ms, " << CompileStats::str();
  if (!dynamic_dims.empty()) {
    os << "\n  dynamic:";
    for (const std::string& d : dynamic_dims) os << " " << d;
    os << " (" << kernels_templated << " kernels take their sizes at run time)";
  }
  if (!kernel_compile_ms.empty()) os << "\n  " << kernels_str();
  for (const auto& r : miss_reasons) os << "\n  miss: " << r;
  return os.str();
}

namespace detail {

namespace {

// Drops the least recently used entry.
void evict_oldest(std::vector<std::shared_ptr<TracedCore::Entry>>& entries, TraceStats& stats) {
  entries.erase(std::ranges::min_element(entries, {}, [](auto& e) { return e->last_use; }));
  stats.evictions++;
}

// A hit on an entry compiled in the background: its error is thrown once (the
// entry dropped), its KILN_LOG=compile line written once.
void finish_background(std::vector<std::shared_ptr<TracedCore::Entry>>& entries,
                       const std::shared_ptr<TracedCore::Entry>& e) {
  if (!e->background.ready()) return;
  try {
    const std::string log = e->background.finish();
    if (!log.empty() && log_enabled("compile")) std::cerr << log;
  } catch (...) {
    std::erase(entries, e);
    throw;
  }
}

// Compiles a traced entry's program, adds the figures to `stats`, and makes the
// lazily compiled backward. Returns the KILN_LOG=compile line.
std::string compile_entry(TracedCore::Entry& e, const CompileOptions& opts,
                          const std::shared_ptr<TracedCore::StatsCell>& stats,
                          const std::string& name) {
  TracedProgram& t = e.traced;
  // The backward compiles when a backward() first reaches the call: a training
  // step that runs backward() itself and returns its loss never needs it.
  e.compiled = compile_program(
      t.graph, std::move(t.backward), t.partition_log, opts,
      [stats](const CompileReport& r, size_t steps, double ms) {
        std::lock_guard<std::mutex> lock(stats->mu);
        stats->stats.add(r, steps, ms);
      },
      name);
  std::ostringstream log;
  log << "kiln: '" << name << "': traced " << t.graph.size() << " nodes in " << t.trace_ms
      << " ms, " << e.compiled.summary()
      << (!t.autograd_call         ? ""
          : t.split.backward_freed ? "; no backward: the body's backward() freed what it needs"
                                   : "; the backward compiles on first use")
      << "\n";
  return log.str();
}

}  // namespace

TracedCore::TracedCore(std::string name, SourceLoc where, Body body)
    : name_(std::move(name)),
      where_(where),
      body_(std::move(body)),
      stats_(std::make_shared<StatsCell>()),
      dynamic_(std::make_unique<DynamicDims>()) {}
TracedCore::~TracedCore() = default;

const TraceStats& TracedCore::stats() const {
  return stats_->stats;
}

void TracedCore::set_cache_size(size_t n) {
  if (n == 0) throw Error("set_cache_size: the cache needs room for at least one signature");
  std::lock_guard<std::mutex> lock(mu_);
  cache_size_ = n;
  while (entries_.size() > cache_size_) evict_oldest(entries_, stats_->stats);
}

std::shared_ptr<TracedCore::Entry> TracedCore::lookup(const TraceArgs& args, bool* eagerly) {
  const Signature sig = signature_of(args, name_, where_);
  std::unique_lock<std::mutex> lock(mu_);
  // The same signature compiling on another thread: wait for it, then look it up.
  compiled_.wait(lock, [&] {
    return std::none_of(in_flight_.begin(), in_flight_.end(), [&](auto* f) { return *f == sig; });
  });
  std::string guard_reason;
  for (auto& e : entries_) {
    if (!(e->key == sig) || !guards_hold(*e, &guard_reason)) continue;
    finish_background(entries_, e);
    stats_->stats.hits++;
    e->last_use = ++clock_;
    return e;
  }

  // A new signature: do the marks fit it?
  dynamic_->fit_marked(sig.is_tensor, sig.types, "traced function '" + name_ + "'", where_);
  std::string reason = "first call", newly_dynamic;
  const bool dumping = !settings().dump_dir.empty();
  bool background = false;
  if (!guard_reason.empty()) {
    reason = guard_reason;
  } else if (!entries_.empty()) {
    auto& last = *std::ranges::max_element(entries_, {}, [](auto& e) { return e->last_use; });
    reason = miss_reason(sig, last->key);
    newly_dynamic = note_dynamic(sig, *last, &background);
    background = background && !dumping;
    if (background && !compiles_now(sig)) {
      stats_->stats.calls_before_compiling++;
      if (log_enabled("recompiles"))
        std::cerr << newly_dynamic << "kiln: '" << name_ << "' (" << reason
                  << ") runs eagerly: a new size compiles when it comes "
                  << settings().compile_after + 1 << " times (KILN_COMPILE_AFTER)\n";
      *eagerly = true;
      return last;
    }
  }
  const bool dynamic = !dynamic_->empty();
  templates_started_ = templates_started_ || dynamic;
  const std::vector<DynamicDim> to_probe = dynamic_->take_probe();
  stats_->stats.misses++;
  keep_recent(stats_->stats.miss_reasons, reason, TraceStats::kRecent);
  if (background) stats_->stats.background_compiles++;
  if (log_enabled("recompiles"))
    std::cerr << newly_dynamic << "kiln: compiling '" << name_ << "' (" << reason << ")"
              << (background ? " in the background; until it is ready, its calls run eagerly" : "") << "\n";

  in_flight_.push_back(&sig);
  lock.unlock();
  std::shared_ptr<Entry> e;
  {
    // However the build ends, the signature is no longer in flight (mu_ held again).
    const ScopeExit landed([&] {
      lock.lock();
      std::erase(in_flight_, &sig);
      compiled_.notify_all();
    });
    if (!to_probe.empty()) probe(sig, to_probe);
    if (background) {
      e = trace(sig);  // here: the body reads the caller's objects
      // On the background thread, which sees only the entry: one evicted before
      // its turn (and not in a call) is not compiled.
      e->background.post(e, [entry = e.get(), opts = entry_options(false, dynamic), stats = stats_,
                             name = name_] { return compile_entry(*entry, opts, stats, name); });
    } else {
      e = build(sig, dumping, dynamic);
      if (dumping)
        write_dump(settings().dump_dir, name_, e->traced.as_traced, *e->compiled.report,
                   e->key.types);
    }
  }
  if (entries_.size() >= cache_size_) evict_oldest(entries_, stats_->stats);
  e->last_use = ++clock_;
  entries_.push_back(e);
  return e;
}

namespace {

// The partition request of a call from eager code that will differentiate the
// result: the gradients of the outputs that require grad (and of the histories
// the body wrote into), with respect to the arguments and captured tensors they
// reach; each root numbered by the tape node output it is. The saved values a
// backward through it reads are looked for in the tensors the caller holds
// after the call: the arguments, the captured tensors and the outputs (by
// storage, at their last write).
PartitionRequest request_split(TraceState& st, const TracedProgram& t,
                               const std::vector<Tensor>& outs,
                               const std::vector<Value>& history_roots) {
  PartitionRequest req;
  req.split = true;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].requires_grad()) continue;
    req.root_outputs.push_back(i);
    req.roots.push_back(st.graph.outputs[i]);
  }
  for (size_t k = 0; k < history_roots.size(); ++k) {
    req.root_outputs.push_back(outs.size() + k);
    req.roots.push_back(history_roots[k]);
  }
  req.saved = &st.saved;
  for (const auto& a : st.args) req.held.push_back(a.get());
  for (const auto& p : st.params) req.held.push_back(p.get());
  for (const Tensor& o : outs) req.held.push_back(TraceState::storage_of(o.impl_ptr()).get());
  req.arg_requires = st.arg_leaf;
  for (const auto& p : st.params) req.param_requires.push_back(p->requires_grad);
  req.freed = st.freed;
  req.n_args = static_cast<int64_t>(st.args.size());
  for (const auto& w : t.arg_writes) req.written_args.push_back(w.first);
  req.custom = detail::custom_function_vjp();
  return req;
}

// What the entry keeps of the partition: the forward (and backward) graphs and the layout.
void take_partition(TracedProgram& t, Partition p) {
  t.graph = std::move(p.forward);
  if (p.split && !p.backward_freed) t.backward = std::make_unique<Graph>(std::move(p.backward));
  t.split = std::move(p);
}

}  // namespace

std::unique_ptr<TracedCore::Entry> TracedCore::trace(const Signature& sig, bool record) {
  TraceSpan span("trace", "trace " + name_);
  auto e = std::make_unique<Entry>();
  e->key = sig;

  auto t0 = std::chrono::steady_clock::now();
  TraceState st;
  TraceArgs sym{{}, sig.numbers, sig.is_tensor};
  st.builder.loc = where_;
  for (size_t i = 0; i < sig.types.size(); ++i)
    sym.tensors.push_back(st.add_arg(static_cast<int64_t>(i), sig.types[i],
                                     sig.grad_mode && sig.requires_grad[i] != 0,
                                     sig.requires_grad[i] == 2));
  {
    TraceScope scope(&st);
    const std::vector<Tensor> outs = body_(sym);
    for (const Tensor& o : outs) {
      if (!o.defined())
        throw Error("traced function '" + name_ + "' returned an undefined tensor", where_);
      st.graph.outputs.push_back(st.value_of(o, where_));
    }
    e->traced.user_outputs = outs.size();
    collect_grad_writebacks(st, e->traced, e->guards, where_);
    collect_arg_writes(st, e->traced);
    const std::vector<Value> history_roots = collect_histories(st, e->traced);
    // Outputs that require grad get a tape node, as eager ops would give them,
    // also when the body ran backward() itself; so do tensors written in place
    // with values that require grad.
    e->traced.autograd_call =
        (sig.grad_mode && std::ranges::any_of(outs, &Tensor::requires_grad)) ||
        !history_roots.empty();
    const PartitionRequest req = e->traced.autograd_call
                                     ? request_split(st, e->traced, outs, history_roots)
                                     : PartitionRequest{};
    if (record) e->traced.as_traced = st.graph;
    take_partition(e->traced, run_partition(st.builder, req,
                                            record ? &e->traced.partition_log : nullptr, record));
  }
  e->arg_grads_read = st.arg_grads_read;
  e->constant_guards = std::move(st.constant_guards);
  e->host_syncs = std::move(st.host_syncs);
  e->traced.params = st.params;
  for (const auto& p : e->traced.params) e->param_grad_state.push_back(autograd_state(*p));
  e->traced.trace_ms = ms_since(t0);
  std::lock_guard<std::mutex> lock(stats_->mu);
  stats_->stats.trace_ms += e->traced.trace_ms;
  return e;
}

CompileOptions TracedCore::entry_options(bool artifacts, bool dynamic) const {
  CompileOptions opts = compile_options();
  opts.fusion = fusion_override_ >= 0 ? fusion_override_ == 1 : fusion_enabled();
  opts.want_artifacts = artifacts;
  opts.dynamic_sizes = dynamic;
  return opts;
}

std::unique_ptr<TracedCore::Entry> TracedCore::build(const Signature& sig, bool artifacts,
                                                     bool dynamic) {
  const CompilerWarmUp warm_up(settings().warm_up);  // LLVM's start-up while the body traces
  std::unique_ptr<Entry> e = trace(sig, artifacts);
  const std::string log = compile_entry(*e, entry_options(artifacts, dynamic), stats_, name_);
  if (log_enabled("compile")) std::cerr << log;
  return e;
}

namespace {

// Writes a gradient back (GradWriteback::Kind): an AddOutput as eager backward()
// would have, into .grad of a leaf, or on through the eager ops that computed the tensor.
void add_grad(const Tensor& arg, const GradWriteback& w, const std::vector<Tensor>& outs) {
  TensorImpl& t = *arg.impl();
  if (w.kind == GradWriteback::Clear) {
    t.grad = nullptr;
    return;
  }
  const Tensor& g = outs[w.output];
  if (w.kind == GradWriteback::FromOutput || (!t.grad_fn && !t.grad)) {
    t.grad = g.impl_ptr();
  } else if (!t.grad_fn) {
    NoGradGuard no_grad;
    Tensor(t.grad).add_(g);
  } else {
    arg.backward(g);  // computed by eager ops: the gradient flows on to their leaves
  }
}

// After the body ran eagerly in place of the entry's plan: the .grad buffers the
// plan would have written in place (a guard's expected_grad, which the plan
// takes as a parameter) take the values eager backward() left in new tensors,
// so that this plan and those traced before the call still find their buffers.
void keep_grad_buffers(const TracedCore::Entry& e, SourceLoc where) {
  for (const GradGuard& g : e.guards) {
    TensorImpl& t = *g.tensor;
    if (!g.expected_grad || !t.grad || t.grad.get() == g.expected_grad) continue;
    auto kept = std::find_if(e.traced.params.begin(), e.traced.params.end(),
                             [&](const auto& p) { return p.get() == g.expected_grad; });
    if (kept == e.traced.params.end() || (*kept)->type != t.grad->type) continue;
    device_copy(t.grad->view(), **kept, where);
    (*kept)->buffer->version++;
    t.grad = *kept;
  }
}

// What a compiled call writes besides its outputs (`all`: every plan output):
// the arguments it wrote in place, the .grad write-backs, the zeros it leaves,
// and the histories that writes without grad took away.
void write_back(const TracedCore::Entry& e, const TraceArgs& args, const std::vector<Tensor>& all,
                SourceLoc where) {
  for (const auto& [a, o] : e.traced.arg_writes) {
    TensorImpl& t = *args.tensors[static_cast<size_t>(a)].impl();
    device_copy(all[o].impl()->view(), t, where);
    t.buffer->version++;
  }
  for (const GradWriteback& w : e.traced.grad_writebacks) add_grad(w.target.in(args), w, all);
  for (auto& z : e.traced.zero_after) mark_zero(*z);
  for (size_t o : e.traced.zero_outputs) mark_zero(*all[o].impl());
  for (const HistoryWrite& h : e.traced.histories)
    if (!h.takes) {
      TensorImpl& t = *h.target.in(args).impl();
      t.grad_fn = nullptr;
      t.requires_grad = false;
    }
}

// A tensor the caller holds whose value the backward reads (a HeldRead), at its
// version after the call: a write into it before the backward makes it raise, as eagerly.
struct HeldNow {
  HeldRead read;
  std::shared_ptr<Buffer> buffer;
  uint64_t version = 0;
};

std::vector<HeldNow> held_now(const TracedCore::Entry& e, const TraceArgs& args,
                              const std::vector<Tensor>& outs) {
  const size_t n_args = args.tensors.size(), n_params = e.traced.params.size();
  std::vector<HeldNow> held;
  for (const HeldRead& h : e.traced.split.held_reads) {
    const TensorImpl& t = h.held < n_args              ? *args.tensors[h.held].impl()
                          : h.held < n_args + n_params ? *e.traced.params[h.held - n_args]
                                                       : *outs[h.held - n_args - n_params].impl();
    if (t.buffer) held.push_back({h, t.buffer, t.buffer->version});
  }
  return held;
}

// The backward of a compiled call's tape node: it checks that what it reads is
// still there (not freed, not written since), runs the compiled backward plan
// on the arguments, the saved values and the given gradients, and leaves
// undefined the gradients no given output reaches.
std::function<std::vector<Tensor>(autograd::Context*, std::vector<Tensor>)> tape_backward(
    const TracedCore::Entry& e, const TraceArgs& args, const std::vector<Tensor>& all,
    const std::vector<Tensor>& outs, std::weak_ptr<autograd::CustomCall> weak_call,
    const std::string& name, SourceLoc where) {
  std::vector<Tensor> saved(all.begin() + static_cast<long>(e.traced.split.saved_begin), all.end());
  std::vector<HeldNow> held = held_now(e, args, outs);
  return [=, bwd = e.compiled.backward, tape = e.tape_shared(),
          arg_tensors = args.tensors](autograd::Context*, std::vector<Tensor> grads) {
    const SplitLayout& split = tape->split;
    const std::vector<size_t>& seeded = split.root_outputs;  // per root, its tape node output
    auto given_root = [&](size_t k) {
      return seeded[k] < grads.size() && grads[seeded[k]].defined();
    };
    auto self = weak_call.lock();
    for (const RootRead& f : self && self->released ? split.reading_roots : split.freed_roots)
      if (given_root(f.root)) throw freed_graph_error(f.op, f.loc);
    for (const StaleRead& s : split.stale_roots)
      if (given_root(s.root)) throw modified_saved_error(s.op, s.expected, s.found, s.loc);
    for (const HeldNow& h : held)
      if (given_root(h.read.root) && h.buffer->version != h.version)
        throw modified_saved_error(h.read.op, h.version, h.buffer->version, h.read.loc);
    // No backward: every root's gradient reads what was freed, and none is given.
    if (!bwd) return std::vector<Tensor>(split.gradient_types.size());
    std::vector<Tensor> bargs = arg_tensors;
    bargs.insert(bargs.end(), saved.begin(), saved.end());
    for (size_t k = 0; k < seeded.size(); ++k) {
      const TensorType& t = split.root_types[k];
      bargs.push_back(given_root(k) ? grads[seeded[k]]
                                    : zeros(t.shape, TensorOptions(t.dtype).device(t.device)));
    }
    std::vector<Tensor> result =
        detail::run_plan(*bwd->get(), bwd->graph(), bargs, tape->params, "traced function", name,
                         where);
    for (size_t j = 0; j < result.size() && j < split.wrt_reached_by.size(); ++j)
      if (std::ranges::none_of(split.wrt_reached_by[j], given_root)) result[j] = Tensor();
    return result;
  };
}

// One tape node for the whole call, whose backward runs the compiled backward
// plan: the outputs that require grad, and the tensors written with values
// that require grad, take it as their history. Returns the call's outputs.
std::vector<Tensor> attach_tape_node(const TracedCore::Entry& e, const TraceArgs& args,
                                     const std::vector<Tensor>& all,
                                     const std::vector<Tensor>& outs, const std::string& name,
                                     SourceLoc where) {
  auto call = autograd::detail::new_custom_call(name);
  call->undefined_if_unreached = true;
  call->backward = tape_backward(e, args, all, outs, call, name, where);
  std::vector<Tensor> inputs;
  for (int64_t a : e.traced.split.wrt_args) inputs.push_back(args.tensors[static_cast<size_t>(a)]);
  for (int64_t p : e.traced.split.wrt_params)
    inputs.emplace_back(e.traced.params[static_cast<size_t>(p)]);
  std::vector<Tensor> call_outs = outs;
  for (const HistoryWrite& h : e.traced.histories)
    if (h.takes) call_outs.push_back(h.target.in(args));
  std::vector<Tensor> result;
  {
    EnableGradGuard grad_on;  // the body wrote with grad on, whatever the caller's mode
    result = autograd::detail::finish_custom(call, inputs, call_outs, where);
  }
  // Tensors written with values that require grad hold the call's history now.
  for (size_t k = outs.size(); k < result.size(); ++k)
    take_history(*call_outs[k].impl(), *result[k].impl());
  result.resize(outs.size());
  // Outputs no gradient flows to stay plain tensors, as eager ops leave them.
  for (size_t i = 0; i < outs.size(); ++i)
    if (std::ranges::find(e.traced.split.root_outputs, i) == e.traced.split.root_outputs.end())
      result[i] = outs[i];
  return result;
}

}  // namespace

std::vector<Tensor> TracedCore::run(Entry& e, const TraceArgs& args) {
  for (int64_t a : e.arg_grads_read)
    if (args.tensors[static_cast<size_t>(a)].impl()->grad)
      throw Error(
          "traced function '" + name_ + "' reads .grad() of its argument " + std::to_string(a) +
              ", which already holds a gradient: inside the trace it would see only this call's "
              "gradient, not the sum eager mode gives (expected an argument without .grad(); "
              "clear it with set_grad(Tensor()) before the call, or capture the tensor instead)",
          where_);
  std::vector<Tensor> all = detail::run_plan(*e.compiled.plan, e.traced.graph, args.tensors,
                                             e.traced.params, "traced function", name_, where_);
  write_back(e, args, all, where_);
  std::vector<Tensor> outs(all.begin(), all.begin() + static_cast<long>(e.traced.user_outputs));
  if (!e.traced.autograd_call) return outs;
  return attach_tape_node(e, args, all, outs, name_, where_);
}

std::vector<Tensor> TracedCore::call(const TraceArgs& args) {
  const bool eager = !jit_enabled() || current_trace() != nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_->stats.calls++;
    if (eager) stats_->stats.eager_calls++;
  }
  // Eager mode, or a traced function called inside another trace (it inlines).
  if (eager) return body_(args);
  bool eagerly = false;
  std::shared_ptr<Entry> e = lookup(args, &eagerly);
  if (eagerly || !e->background.ready()) {  // a size seen once, or compiling in the background
    if (!eagerly) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_->stats.calls_while_compiling++;
    }
    const EagerCallScope running_eagerly;
    std::vector<Tensor> outs = body_(args);
    keep_grad_buffers(*e, where_);
    return outs;
  }
  for (const HostSync& s : e->host_syncs)
    if (!s.alive.expired()) s.sync();
  // KILN_CHECK compares on the host against eager mode and, kernel by kernel,
  // the reference kernels: plans of backends that keep their slots' buffers.
  if (check_enabled() && backend_for(e->compiled.plan->device).keeps_slots() &&
      !e->checked.exchange(true))
    return checked_run(*e, args);
  return run(*e, args);
}

Graph TracedCore::graph(const TraceArgs& args, bool optimized) {
  std::unique_ptr<Entry> e = build(signature_of(args, name_, where_), false);
  return optimized ? e->compiled.report->optimized : e->traced.graph;
}

void TracedCore::save(const std::string& path, const TraceArgs& args) {
  std::unique_ptr<Entry> e = build(signature_of(args, name_, where_), false);
  if (e->traced.autograd_call)
    throw Error("traced function '" + name_ + "': saving a function whose outputs require grad " +
                    "saves only its forward; call save() under NoGradGuard",
                where_);
  if (!e->traced.grad_writebacks.empty())
    throw Error("traced function '" + name_ + "' leaves gradients in .grad(), which a saved graph cannot "
                "do (expected a function without backward(), or one that clears the gradients)",
                where_);
  std::vector<Tensor> params;
  for (auto& p : e->traced.params) params.emplace_back(p);
  save_graph(path, e->traced.graph, params, SaveOptions{.name = name_});
}

std::vector<Tensor> TracedCore::profile(const std::string& path, const TraceArgs& args) {
  io::check_write_target(path);
  std::vector<Tensor> out;
  write_chrome_trace(path, profiled([&] { out = call(args); }));
  return out;
}

void TracedCore::dump(const std::string& dir, const TraceArgs& args) {
  std::unique_ptr<Entry> e = build(signature_of(args, name_, where_), true);
  write_dump(dir, name_, e->traced.as_traced, *e->compiled.report, e->key.types);
}

}  // namespace detail
}  // namespace kiln
