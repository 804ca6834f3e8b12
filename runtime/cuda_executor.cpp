// The CUDA executor (see cuda_executor.h). A generated kernel takes its
// buffers as a device-side array of pointers, so each plan run writes all its
// kernels' arrays into one page-locked staging block, uploads it with one
// asynchronous copy, and launches. A staging block is reused once an event
// recorded after its last launch has passed, so the host never waits on the
// device for it in steady state. The sort and attention library steps launch
// the library kernels their steps carry (runtime/cuda_library.h). Collectives
// run on the device when the communicator has one (NCCL), else through host memory.
#include "runtime/cuda_executor.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "ir/error.h"
#include "runtime/allocator.h"
#include "runtime/collective.h"
#include "runtime/cublas.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_library.h"

namespace kiln {
namespace {

// Pinned host memory and device memory of the same size, and a fence for its last use.
struct Staging {
  void* host = nullptr;
  void* dev = nullptr;
  size_t cap = 0;
  std::unique_ptr<cuda::Event> fence;
  bool busy = false;  // taken by a run that has not yet recorded its fence
};

struct StagingPool {
  std::mutex mu;
  std::vector<std::unique_ptr<Staging>> blocks;
};

constexpr int kMaxDevices = 64;
constexpr size_t kMaxStaging = 256;  // past this many in flight, wait for the oldest

StagingPool& pool(int device) {
  static auto* pools = new StagingPool[kMaxDevices];  // never destroyed (see the allocators)
  KILN_CHECK(device >= 0 && device < kMaxDevices, "cuda:", device, " is not a valid device index");
  return pools[device];
}

Staging& acquire(size_t bytes, int device) {
  StagingPool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  for (auto& s : p.blocks)
    if (!s->busy && s->cap >= bytes && s->fence->done()) {
      s->busy = true;
      return *s;
    }
  if (p.blocks.size() >= kMaxStaging) {
    // Many runs queued ahead of the device: wait for the oldest and reuse it.
    Staging& s = *p.blocks.front();
    std::rotate(p.blocks.begin(), p.blocks.begin() + 1, p.blocks.end());
    if (!s.busy) {
      s.fence->wait();
      if (s.cap >= bytes) {
        s.busy = true;
        return s;
      }
    }
  }
  auto s = std::make_unique<Staging>();
  s->cap = std::max<size_t>(alloc_size_class(bytes), 4096);
  s->host = cuda::host_alloc_pinned(s->cap);
  s->dev = cuda_alloc(s->cap, device);
  s->fence = std::make_unique<cuda::Event>(device, /*timing=*/false);
  s->busy = true;
  p.blocks.push_back(std::move(s));
  return *p.blocks.back();
}

void release(Staging& s, int device) {
  StagingPool& p = pool(device);
  s.fence->record();
  std::lock_guard<std::mutex> lock(p.mu);
  s.busy = false;
}

void launch_on(void* fn, const CudaLaunch& l, void* dev_buffers, int device) {
  const int64_t range = l.range;
  if (range <= 0) return;
  const cuda::DeviceInfo& info = cuda::device_info(device);
  const int64_t per_sm = l.kind == CudaLaunch::BlockPerRow ? 8 : 32;
  int64_t blocks = l.kind == CudaLaunch::BlockPerRow ? range : (range + l.block - 1) / l.block;
  blocks = std::clamp<int64_t>(blocks, 1, std::max<int64_t>(info.sm_count, 1) * per_sm);
  long long begin = 0, end = range;
  void* params[] = {&dev_buffers, &begin, &end};
  cuda::launch(fn, static_cast<unsigned>(blocks), static_cast<unsigned>(l.block),
               static_cast<unsigned>(l.shared_bytes), params, device);
}

// The collectives a plan run has started on the device (NCCL) and not yet
// waited for. A call receives into a buffer of its own (the planner gives its
// outputs' slots lifetimes that begin at the wait); a bucket of several tensors
// is packed into that buffer first and reduced in place. Its inputs are read
// straight from their slots, which the schedule keeps live until the wait.
class DeviceCollectives {
 public:
  DeviceCollectives(const Plan& plan, void* const* ptr)
      : plan_(plan), ptr_(ptr), device_(plan.device.index), runs_(plan.collectives.size()) {}
  ~DeviceCollectives() { finish(); }

  void start(const step::CollectiveStart& s) {
    const PlanCollective& c = plan_.collectives[static_cast<size_t>(s.collective)];
    Run& r = runs_[static_cast<size_t>(s.collective)];
    const size_t esize = dtype_size(c.call.dtype);
    const size_t sent = static_cast<size_t>(c.call.count) * esize;
    const size_t got =
        static_cast<size_t>(collective_recv_count(c.call, collectives::world_size())) * esize;
    r.bytes = std::max<size_t>({sent, got, 1});
    r.buffer = cuda_alloc(r.bytes, device_);
    const void* send = ptr_[c.inputs.front()];
    if (c.inputs.size() > 1) {
      KILN_CHECK(c.call.op == OpKind::all_reduce || c.call.op == OpKind::broadcast,
                 "internal: ", c.call.what, " packs several tensors but does not run in place");
      size_t at = 0;
      for (int32_t in : c.inputs) {
        const size_t bytes = static_cast<size_t>(plan_.slots[static_cast<size_t>(in)].bytes());
        cuda::copy_device(static_cast<char*>(r.buffer) + at, ptr_[in], bytes, device_);
        at += bytes;
      }
      send = r.buffer;
    }
    auto ready = std::make_shared<cuda::Event>(device_, /*timing=*/false);
    ready->record();
    try {
      r.ticket = collectives::start_device_call(c.call, send, r.buffer, std::move(ready));
    } catch (Error& e) {
      e.attach(c.loc);
      throw;
    }
  }

  void wait(const step::CollectiveWait& w, const std::string& name) {
    const PlanCollective& c = plan_.collectives[static_cast<size_t>(w.collective)];
    Run& r = runs_[static_cast<size_t>(w.collective)];
    KILN_CHECK(r.ticket, "internal: ", name, " waits for a collective that was not started");
    try {
      collectives::wait_device(r.ticket);
    } catch (Error& e) {
      e.attach(c.loc);
      release(r);
      throw;
    }
    size_t at = 0;
    for (int32_t out : c.outputs) {
      const size_t bytes = static_cast<size_t>(plan_.slots[static_cast<size_t>(out)].bytes());
      cuda::copy_device(ptr_[out], static_cast<char*>(r.buffer) + at, bytes, device_);
      at += bytes;
    }
    release(r);  // reused only after the copies above, in stream order
  }

  // Waits for any call still in flight (after a failed step), so none outlives the run.
  void finish() noexcept {
    for (Run& r : runs_) {
      if (!r.ticket) continue;
      try {
        collectives::wait_device(r.ticket);
      } catch (...) {
        // The step that failed first is the error this run reports.
      }
      release(r);
    }
  }

 private:
  struct Run {
    collectives::Ticket ticket;
    void* buffer = nullptr;
    size_t bytes = 0;
  };
  void release(Run& r) noexcept {
    r.ticket.reset();
    if (r.buffer) cuda_free(r.buffer, r.bytes, device_);
    r.buffer = nullptr;
  }

  const Plan& plan_;
  void* const* ptr_;
  int device_;
  std::vector<Run> runs_;
};

// The sort and attention library kernels a step carries, launched on the
// device's stream; their scratch memory comes from the caching allocator (its
// reuse is ordered on the stream).
class DeviceLibrary final : public CudaLibraryLauncher {
 public:
  DeviceLibrary(const std::shared_ptr<const CudaLibraryFunctions>& fns, const std::string& step,
                int device)
      : fns_(fns.get()), device_(device) {
    KILN_CHECK(fns_ && fns_->device == device, "internal: library step ", step,
               " of a CUDA plan has no library kernels for cuda:", device);
  }
  void launch(const char* name, int64_t grid, int block, const void* args, size_t) override {
    void* params[] = {const_cast<void*>(args)};
    cuda::launch(fns_->find(name), static_cast<unsigned>(grid), static_cast<unsigned>(block), 0,
                 params, device_);
  }
  void* alloc(size_t bytes) override { return cuda_alloc(bytes, device_); }
  void free(void* p, size_t bytes) override { cuda_free(p, bytes, device_); }

 private:
  const CudaLibraryFunctions* fns_;
  int device_;
};

// Whether this plan's collectives run on its device (NCCL), or through the host.
bool collectives_on_device(const Plan& plan) {
  if (plan.collectives.empty()) return false;
  const int d = collectives::device();
  if (d < 0) return false;
  KILN_CHECK(d == plan.device.index, "distributed: ", plan.collectives.front().call.what,
             " on cuda:", plan.device.index, ", but this rank's NCCL collectives run on cuda:", d,
             " (the local rank's device; move the tensor there)");
  return true;
}

}  // namespace

void execute_cuda_plan(const Plan& plan, void* const* args, void* const* params,
                       void* const* outputs) {
  const int device = plan.device.index;
  const size_t n = plan.slots.size();
  std::vector<void*> ptr(n);
  std::vector<void*> temps(plan.temp_bytes.size());
  auto temp_size = [&](size_t t) {
    return static_cast<size_t>(std::max<int64_t>(plan.temp_bytes[t], 1));
  };
  for (size_t t = 0; t < temps.size(); ++t) temps[t] = cuda_alloc(temp_size(t), device);
  resolve_slots(plan, args, params, outputs, temps.data(), ptr.data());

  // Every kernel's buffer list, in one upload.
  size_t entries = 0;
  for (const PlanStep& step : plan.steps)
    if (std::holds_alternative<step::CudaKernel>(step.what)) entries += step.slots.size();
  Staging* staging = nullptr;
  if (entries) {
    staging = &acquire(entries * sizeof(void*), device);
    auto* table = static_cast<void**>(staging->host);
    for (const PlanStep& step : plan.steps)
      if (std::holds_alternative<step::CudaKernel>(step.what))
        for (int32_t s : step.slots) *table++ = ptr[static_cast<size_t>(s)];
    cuda::copy_to_device(staging->dev, staging->host, entries * sizeof(void*), device);
  }

  // Collectives on the device (NCCL), or staged through host memory: there the
  // copy to the host waits for the kernels that produced the inputs, and the
  // results go back on the stream.
  std::optional<DeviceCollectives> on_device;
  if (collectives_on_device(plan)) on_device.emplace(plan, ptr.data());
  CollectiveRuns comms(
      plan, ptr.data(),
      [](void* host, const void* slot, size_t bytes, int dev) { cuda::copy_to_host(host, slot, bytes, dev); },
      [](void* slot, const void* host, size_t bytes, int dev) { cuda::copy_to_device(slot, host, bytes, dev); });
  size_t offset = 0;
  // Profiling times each step on the host with the stream synchronised after
  // it, so that its time is the device's work (and the launch's).
  const bool profiling = plan_profiling();
  try {
    for (size_t si = 0; si < plan.steps.size(); ++si) {
      const PlanStep& step = plan.steps[si];
      const double t0 = profiling ? trace_now_us() : 0;
      if (const auto* k = std::get_if<step::CudaKernel>(&step.what)) {
        launch_on(k->fn, k->launch, static_cast<void**>(staging->dev) + offset, device);
        offset += step.slots.size();
      } else if (const auto* m = std::get_if<step::Matmul>(&step.what)) {
        auto view = [&](size_t i) {
          const int32_t s = step.slots[i];
          const TensorType& t = plan.slots[static_cast<size_t>(s)].type;
          void* data = ptr[static_cast<size_t>(s)];
          return i == 2 ? dense_view(data, t.dtype, t.shape)
                        : matmul_operand_view(data, t, i == 0 ? m->trans_a : m->trans_b);
        };
        // (The CUDA backend asks for no accumulating products: cuBLAS gets alpha 1, beta 0.)
        KILN_CHECK(m->alpha == 1 && m->beta == 0, "internal: ", step.name,
                   " asks cuBLAS to scale or accumulate");
        if (step.slots.size() > 3 || m->relu) {
          GemmEpilogue e;
          if (step.slots.size() > 3) e.bias = ptr[static_cast<size_t>(step.slots[3])];
          e.relu = m->relu;
          matmul_cuda_epilogue(view(0), view(1), view(2), e, device);
        } else {
          matmul_cuda(view(0), view(1), view(2), device);
        }
      } else if (const auto* c = std::get_if<step::ValueCheck>(&step.what)) {
        // A host check: wait for the stream, look at the values, then copy them on.
        const PlanSlot& in = plan.slots[static_cast<size_t>(step.slots[0])];
        const void* src = ptr[static_cast<size_t>(step.slots[0])];
        std::vector<char> host(static_cast<size_t>(in.bytes()));
        cuda::copy_to_host(host.data(), src, host.size(), device);
        check_values_step(*c, host.data(), in.type);
        cuda::copy_device(ptr[static_cast<size_t>(step.slots[1])], src, host.size(), device);
      } else if (const auto* a = std::get_if<step::Attention>(&step.what)) {
        DeviceLibrary lib(a->cuda, step.name, device);
        auto at = [&](size_t i) { return ptr[static_cast<size_t>(step.slots[i])]; };
        if (a->which < 0) {
          cuda_attention_forward(a->shape, at(0), at(1), at(2), at(3), lib);
        } else {
          // The gradients the mask asks for, end to end in one buffer.
          void* grad[3] = {};
          const std::array<int64_t, 3> offset = attention_grad_offsets(a->shape, a->which);
          for (size_t i = 0; i < 3; ++i)
            if (offset[i] >= 0)
              grad[i] = static_cast<char*>(at(5)) + offset[i] * int64_t(dtype_size(a->shape.dtype));
          cuda_attention_backward(a->shape, at(0), at(1), at(2), at(3), at(4), grad[0], grad[1],
                                  grad[2], lib);
        }
      } else if (const auto* c = std::get_if<step::ClusterLogprob>(&step.what)) {
        DeviceLibrary lib(c->cuda, step.name, device);
        auto at = [&](size_t i) { return ptr[static_cast<size_t>(step.slots[i])]; };
        const auto* t = static_cast<const int64_t*>(at(2));
        if (c->which < 0) {
          cuda_cluster_logprob_forward(c->shape, at(0), at(1), t, at(3), lib);
        } else {
          // The gradients the mask asks for, end to end in one buffer.
          void* grad[2] = {};
          const std::array<int64_t, 2> offset = cluster_logprob_grad_offsets(c->shape, c->which);
          for (size_t i = 0; i < 2; ++i)
            if (offset[i] >= 0)
              grad[i] = static_cast<char*>(at(4)) + offset[i] * int64_t(dtype_size(c->shape.dtype));
          cuda_cluster_logprob_backward(c->shape, at(0), at(1), t, at(3), grad[0], grad[1], lib);
        }
      } else if (const auto* s = std::get_if<step::Sort>(&step.what)) {
        DeviceLibrary lib(s->cuda, step.name, device);
        cuda_sort_lines(s->lines, ptr[static_cast<size_t>(step.slots[0])],
                        static_cast<int64_t*>(ptr[static_cast<size_t>(step.slots[1])]), lib);
      } else if (const auto* s = std::get_if<step::CollectiveStart>(&step.what)) {
        if (on_device) {
          on_device->start(*s);
        } else {
          comms.start(*s);
        }
      } else if (const auto* w = std::get_if<step::CollectiveWait>(&step.what)) {
        if (on_device) {
          on_device->wait(*w, step.name);
        } else {
          comms.wait(*w, step.name);
        }
      } else {
        throw Error("internal: a CUDA plan holds a CPU step ('" + step.name + "')");
      }
      if (profiling) {
        cuda::synchronize(device);
        record_step_event(step, si, t0);
      }
    }
  } catch (...) {
    // A failed check: give back what this call took, then report it.
    comms.finish();
    if (on_device) on_device->finish();
    if (staging) release(*staging, device);
    for (size_t t = 0; t < temps.size(); ++t) cuda_free(temps[t], temp_size(t), device);
    throw;
  }
  if (staging) release(*staging, device);

  // Outputs not written in place, then parameter updates (as execute_cpu_plan does).
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const PlanSlot& slot = plan.slots[static_cast<size_t>(plan.outputs[i])];
    bool in_place = slot.kind == PlanSlot::Output && slot.index == static_cast<int64_t>(i);
    if (!in_place)
      cuda::copy_device(outputs[i], ptr[static_cast<size_t>(plan.outputs[i])],
                        static_cast<size_t>(slot.bytes()), device);
  }
  for (const Plan::Update& u : plan.updates)
    cuda::copy_device(params[u.param], ptr[static_cast<size_t>(u.slot)],
                      static_cast<size_t>(plan.slots[static_cast<size_t>(u.slot)].bytes()), device);
  for (size_t t = 0; t < temps.size(); ++t) cuda_free(temps[t], temp_size(t), device);
}

}  // namespace kiln
