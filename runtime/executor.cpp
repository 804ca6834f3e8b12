// The executor: runs a Plan's steps over slot buffers, splitting each kernel's
// outer loop across the thread pool.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <optional>
#include <vector>

#include "ir/error.h"
#include "runtime/allocator.h"
#include "runtime/blas.h"
#include "runtime/plan.h"
#include "runtime/reference.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

const char* step_what(const PlanStep& step) {
  if (std::holds_alternative<step::CpuKernel>(step.what) ||
      std::holds_alternative<step::CudaKernel>(step.what))
    return "kernel";
  if (std::holds_alternative<step::Matmul>(step.what)) return "blas";
  if (std::holds_alternative<step::Sort>(step.what)) return "sort";
  if (std::holds_alternative<step::Attention>(step.what)) return "attention";
  if (std::holds_alternative<step::ClusterLogprob>(step.what)) return "cluster_logprob";
  if (std::holds_alternative<step::ValueCheck>(step.what)) return "check";
  return "collective";
}

// The kernels of a CpuKernel step (one, or a foreach step's parts) with their
// buffer pointers, run over a range of the parts' ranges laid end to end.
class KernelParts {
 public:
  // The kernel's slots start at step.slots[first]; `scratch` holds the pointers
  // and parts when the stack arrays are too small.
  KernelParts(const step::CpuKernel& k, const PlanStep& step, void* const* ptr,
              std::vector<void*>& scratch, size_t first = 0) {
    const size_t nparts = 1 + k.more.size();
    const size_t nslots = step.slots.size() - first;
    bufs_ = local_bufs_;
    if (nslots + nparts > std::size(local_bufs_)) {
      scratch.resize(nslots + nparts);
      bufs_ = scratch.data();
    }
    runs_ = local_runs_;
    if (nparts > std::size(local_runs_)) {
      heap_runs_.resize(nparts);
      runs_ = heap_runs_.data();
    }
    size_t at = 0;  // into bufs_
    size_t slot = first;
    auto add = [&](CpuKernelFn fn, const std::atomic<CpuKernelFn>* better,
                   const std::vector<int64_t>& params, int64_t range, size_t slots) {
      void** b = bufs_ + at;
      for (size_t i = 0; i < slots; ++i) b[i] = ptr[step.slots[slot + i]];
      b[slots] = const_cast<int64_t*>(params.data());  // read only by kernel templates
      runs_[n_++] = {kernel_to_run(fn, better), b, range};
      range_ += range;
      at += slots + 1;
      slot += slots;
    };
    add(k.fn, k.better, k.params, k.range,
        k.more.empty() ? nslots : static_cast<size_t>(k.own_slots));
    for (const step::CpuKernel::Part& p : k.more)
      add(p.fn, p.better, p.params, p.range, static_cast<size_t>(p.slots));
  }
  KernelParts(const KernelParts&) = delete;
  KernelParts& operator=(const KernelParts&) = delete;

  static int64_t range_of(const step::CpuKernel& k) {
    int64_t r = k.range;
    for (const step::CpuKernel::Part& p : k.more) r += p.range;
    return r;
  }
  int64_t range() const { return range_; }
  // Iterations [b, e) of the parts end to end.
  void run(int64_t b, int64_t e) const {
    for_each_part(
        n_, [&](size_t i) { return runs_[i].range; }, b, e,
        [&](size_t i, int64_t lo, int64_t hi) { runs_[i].fn(runs_[i].bufs, lo, hi); });
  }

 private:
  struct Run {
    CpuKernelFn fn;
    void** bufs;
    int64_t range;
  };
  void* local_bufs_[24];
  void** bufs_;
  Run local_runs_[2];
  std::vector<Run> heap_runs_;
  Run* runs_;
  size_t n_ = 0;
  int64_t range_ = 0;
};

// Elements [t0, t1) of the leading dim of v, an operand or output of a product
// whose output has rank `rank` and nb there; v itself when v is broadcast over
// that dim (a shared operand).
View leading_slice(const View& v, int64_t rank, int64_t nb, int64_t t0, int64_t t1) {
  if (v.rank() != rank || v.shape[0] != nb) return v;
  View s = v;
  s.data = static_cast<char*>(v.data) + t0 * v.strides[0] * int64_t(dtype_size(v.dtype));
  s.shape[0] = t1 - t0;
  return s;
}

}  // namespace

void record_step_event(const PlanStep& step, size_t index, double start_us, int64_t range,
                       int64_t parts) {
  TraceEvent e;
  e.name = step.name;
  e.start_us = start_us;
  e.dur_us = trace_now_us() - start_us;
  e.thread = trace_thread();
  e.what = step_what(step);
  e.step = static_cast<int64_t>(index);
  e.cost = step.cost;
  e.end = range;
  e.parts = parts;
  record_trace_event(std::move(e));
}

void execute_cpu_plan(const Plan& plan, void* const* args, void* const* params,
                      void* const* outputs, KeptBuffers* keep) {
  KILN_CHECK(plan.device.is_cpu(), "internal: the CPU executor was given a plan for ",
             plan.device.str());
  const size_t n = plan.slots.size();
  PointerScratch<32> ptr_scratch(n);
  void** ptr = ptr_scratch.data();
  const size_t nt = plan.temp_bytes.size();
  PointerScratch<16> temp_scratch(nt);
  void** temps = temp_scratch.data();
  for (size_t t = 0; t < nt; ++t)
    temps[t] = cpu_alloc(static_cast<size_t>(std::max<int64_t>(plan.temp_bytes[t], 1)));

  resolve_slots(plan, args, params, outputs, temps, ptr);

  auto free_temps = [&] {
    for (size_t t = 0; t < nt; ++t)
      cpu_free(temps[t], static_cast<size_t>(std::max<int64_t>(plan.temp_bytes[t], 1)));
  };
  std::vector<void*> kargs, prologue_args;
  CollectiveRuns comms(
      plan, ptr, [](void* host, const void* slot, size_t bytes, int) { std::memcpy(host, slot, bytes); },
      [](void* slot, const void* host, size_t bytes, int) { std::memcpy(slot, host, bytes); });
  const bool profiling = plan_profiling();
  try {
    for (size_t si = 0; si < plan.steps.size(); ++si) {
      const PlanStep& step = plan.steps[si];
      const double t0 = profiling ? trace_now_us() : 0;
      int64_t parts_run = 0;
      if (const auto* k = std::get_if<step::CpuKernel>(&step.what); k && k->deferred) {
        continue;  // a later matmul's prologue: it runs there
      } else if (k) {
        const KernelParts parts(*k, step, ptr, kargs);
        const int64_t range = parts.range();
        if (range <= k->grain) {
          parts.run(0, range);
          parts_run = 1;
        } else if (profiling) {
          std::atomic<int64_t> n_parts{0};
          parallel_for(range, k->grain, [&](int64_t b, int64_t e) {
            TraceEvent c;
            c.start_us = trace_now_us();
            parts.run(b, e);
            c.dur_us = trace_now_us() - c.start_us;
            c.name = step.name;
            c.cat = "chunk";
            c.thread = trace_thread();
            c.begin = b;
            c.end = e;
            record_trace_event(std::move(c));
            n_parts++;
          });
          parts_run = n_parts.load();
        } else {
          parallel_for(range, k->grain, [&](int64_t b, int64_t e) { parts.run(b, e); });
        }
      } else if (const auto* m = std::get_if<step::Matmul>(&step.what)) {
        const step::CpuKernel& ep = m->epilogue;
        KILN_CHECK((ep.fn ? step.slots.size() > 3 : step.slots.size() == 3) && !m->relu,
                   "internal: ", step.name, " asks the CPU for a cuBLASLt epilogue");
        const PlanSlot& a = plan.slots[step.slots[0]];
        const PlanSlot& b = plan.slots[step.slots[1]];
        const PlanSlot& o = plan.slots[step.slots[2]];
        const View av = matmul_operand_view(ptr[step.slots[0]], a.type, m->trans_a);
        const View bv = matmul_operand_view(ptr[step.slots[1]], b.type, m->trans_b);
        const View ov = dense_view(ptr[step.slots[2]], o.type.dtype, o.type.shape);
        std::optional<KernelParts> epilogue;
        if (ep.fn) epilogue.emplace(ep, step, ptr, kargs, 3);
        const int64_t cols = o.type.shape.empty() ? 1 : o.type.shape.back();
        const int64_t rows = cols ? o.type.numel() / cols : 0;
        const int64_t per_row = rows ? ep.range / rows : 0;
        // The epilogue's iterations of each block of product rows (from row0 on),
        // run as soon as BLAS has written the block.
        auto product = [&](const View& x, const View& y, const View& out, int64_t row0) {
          if (!epilogue) return matmul_cpu(x, y, out, m->alpha, m->beta);
          matmul_cpu(x, y, out, m->alpha, m->beta, [&](int64_t r0, int64_t r1) {
            const int64_t b = (row0 + r0) * per_row, e = (row0 + r1) * per_row;
            if (e - b <= ep.grain)
              epilogue->run(b, e);
            else
              parallel_for(e - b, ep.grain,
                           [&](int64_t x, int64_t y) { epilogue->run(b + x, b + y); });
          });
        };
        if (m->prologue < 0) {
          product(av, bv, ov, 0);
        } else {
          // An earlier step writes b: each block of b's leading dim is written,
          // then multiplied while in cache (step::Matmul::prologue).
          const PlanStep& before = plan.steps[static_cast<size_t>(m->prologue)];
          const KernelParts prologue(std::get<step::CpuKernel>(before.what), before, ptr,
                                     prologue_args);
          const int64_t nb = ov.shape[0];
          const int64_t per_block = prologue.range() / nb, rows_per_block = rows / nb;
          const int64_t block_bytes = b.type.bytes() / nb;
          // Blocks of at least 64 KiB of b a chunk (a conv's 16-channel 4x4
          // patches are 9 KiB an image), one block at a time.
          const int64_t grain = std::max<int64_t>(1, (64 << 10) / std::max<int64_t>(block_bytes, 1));
          parallel_for(nb, grain, [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; t += grain) {
              const int64_t t2 = std::min(t1, t + grain);
              prologue.run(t * per_block, t2 * per_block);
              const int64_t r = ov.rank();
              product(leading_slice(av, r, nb, t, t2), leading_slice(bv, r, nb, t, t2),
                      leading_slice(ov, r, nb, t, t2), t * rows_per_block);
            }
          });
        }
      } else if (const auto* c = std::get_if<step::ValueCheck>(&step.what)) {
        const PlanSlot& in = plan.slots[step.slots[0]];
        check_values_step(*c, ptr[step.slots[0]], in.type);
        if (ptr[step.slots[1]] != ptr[step.slots[0]])
          std::memcpy(ptr[step.slots[1]], ptr[step.slots[0]], static_cast<size_t>(in.bytes()));
      } else if (const auto* a = std::get_if<step::Attention>(&step.what)) {
        const void* in[5];
        for (size_t i = 0; i + 1 < step.slots.size(); ++i) in[i] = ptr[step.slots[i]];
        run_attention_step(*a, in, ptr[step.slots.back()]);
      } else if (const auto* c = std::get_if<step::ClusterLogprob>(&step.what)) {
        const void* in[4];
        for (size_t i = 0; i + 1 < step.slots.size(); ++i) in[i] = ptr[step.slots[i]];
        run_cluster_logprob_step(*c, in, ptr[step.slots.back()]);
      } else if (const auto* s = std::get_if<step::Sort>(&step.what)) {
        sort_lines(s->lines, ptr[step.slots[0]], static_cast<int64_t*>(ptr[step.slots[1]]));
      } else if (const auto* s = std::get_if<step::CollectiveStart>(&step.what)) {
        comms.start(*s);
      } else if (const auto* w = std::get_if<step::CollectiveWait>(&step.what)) {
        comms.wait(*w, step.name);
      } else {
        throw Error("internal: a CPU plan holds a CUDA step ('" + step.name + "')");
      }
      if (profiling) {
        const auto* k = std::get_if<step::CpuKernel>(&step.what);
        record_step_event(step, si, t0, k ? KernelParts::range_of(*k) : 0, parts_run);
      }
    }
  } catch (...) {
    comms.finish();  // no collective still reads or writes this run's buffers
    free_temps();  // a failed check, or an allocation inside BLAS
    throw;
  }
  const double t_copy = profiling ? trace_now_us() : 0;

  // Outputs not written in place (an argument or parameter returned as is, or
  // the same value returned twice) are copied.
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const PlanSlot& slot = plan.slots[plan.outputs[i]];
    bool in_place = slot.kind == PlanSlot::Output && slot.index == static_cast<int64_t>(i);
    if (!in_place) std::memcpy(outputs[i], ptr[plan.outputs[i]], static_cast<size_t>(slot.bytes()));
  }
  for (const Plan::Update& u : plan.updates) {
    if (ptr[u.slot] != params[u.param])
      std::memcpy(params[u.param], ptr[u.slot], static_cast<size_t>(plan.slots[u.slot].bytes()));
  }

  if (profiling) {
    TraceEvent e;
    e.name = "(copies of outputs and parameter updates)";
    e.cat = "copies";
    e.start_us = t_copy;
    e.dur_us = trace_now_us() - t_copy;
    e.thread = trace_thread();
    record_trace_event(std::move(e));
  }
  if (keep) {
    keep->slot_data.assign(ptr, ptr + n);
    keep->temps.assign(temps, temps + nt);
    keep->temp_bytes = plan.temp_bytes;
    return;
  }
  free_temps();
}

void CollectiveRuns::start(const step::CollectiveStart& s) {
  const PlanCollective& c = plan_.collectives[static_cast<size_t>(s.collective)];
  const size_t esize = dtype_size(c.call.dtype);
  std::vector<char> packed(static_cast<size_t>(c.call.count) * esize);
  size_t at = 0;
  for (int32_t s : c.inputs) {
    const size_t bytes = static_cast<size_t>(plan_.slots[static_cast<size_t>(s)].bytes());
    if (bytes) read_(packed.data() + at, ptr_[s], bytes, plan_.device.index);
    at += bytes;
  }
  try {
    tickets_[static_cast<size_t>(s.collective)] = collectives::start_call(c.call, std::move(packed));
  } catch (Error& e) {
    e.attach(c.loc);
    throw;
  }
}

void CollectiveRuns::wait(const step::CollectiveWait& w, const std::string& name) {
  const PlanCollective& c = plan_.collectives[static_cast<size_t>(w.collective)];
  collectives::Ticket t = std::move(tickets_[static_cast<size_t>(w.collective)]);
  KILN_CHECK(t, "internal: ", name, " waits for a collective that was not started");
  const std::vector<char>* got = nullptr;
  try {
    got = &collectives::wait(t);
  } catch (Error& e) {
    e.attach(c.loc);
    throw;
  }
  size_t at = 0;
  for (int32_t s : c.outputs) {
    const size_t bytes = static_cast<size_t>(plan_.slots[static_cast<size_t>(s)].bytes());
    if (bytes) write_(ptr_[s], got->data() + at, bytes, plan_.device.index);
    at += bytes;
  }
}

void CollectiveRuns::finish() noexcept {
  for (collectives::Ticket& t : tickets_) {
    if (!t) continue;
    try {
      (void)collectives::wait(t);
    } catch (...) {
      // The step that failed first is the error this run reports.
    }
    t.reset();
  }
}

void run_attention_step(const step::Attention& a, const void* const* in, void* out) {
  if (a.which < 0)
    attention_forward(a.shape, in[0], in[1], in[2], out);
  else
    attention_backward(a.shape, a.which, in[0], in[1], in[2], in[3], in[4], out);
}

void run_cluster_logprob_step(const step::ClusterLogprob& c, const void* const* in, void* out) {
  const auto* t = static_cast<const int64_t*>(in[2]);
  if (c.which < 0)
    cluster_logprob_forward(c.shape, in[0], in[1], t, out);
  else
    cluster_logprob_backward(c.shape, c.which, in[0], in[1], t, in[3], out);
}

void check_values_step(const step::ValueCheck& check, const void* in, const TensorType& type) {
  try {
    check_values(check.op, check.attrs, dense_view(const_cast<void*>(in), type.dtype, type.shape));
  } catch (Error& e) {
    e.attach(check.loc);
    throw;
  }
}

void resolve_slots(const Plan& plan, void* const* args, void* const* params, void* const* outputs,
                   void* const* temps, void** ptr) {
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    const PlanSlot& slot = plan.slots[s];
    switch (slot.kind) {
      case PlanSlot::Arg:
        ptr[s] = args[slot.index];
        break;
      case PlanSlot::Param:
        ptr[s] = params[slot.index];
        break;
      case PlanSlot::Temp:
        ptr[s] = temps[slot.index];
        break;
      case PlanSlot::Output:
        ptr[s] = outputs[slot.index];
        break;
    }
  }
}

View matmul_operand_view(void* data, const TensorType& t, bool transposed) {
  View v = dense_view(data, t.dtype, t.shape);
  if (transposed && v.rank() >= 2) {
    std::swap(v.shape[v.rank() - 1], v.shape[v.rank() - 2]);
    std::swap(v.strides[v.rank() - 1], v.strides[v.rank() - 2]);
  }
  return v;
}

void release_kept(KeptBuffers& keep) {
  for (size_t t = 0; t < keep.temps.size(); ++t)
    cpu_free(keep.temps[t], static_cast<size_t>(std::max<int64_t>(keep.temp_bytes[t], 1)));
  keep = {};
}

}  // namespace kiln
