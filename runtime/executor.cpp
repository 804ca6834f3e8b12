// The executor: runs a Plan's steps over slot buffers, splitting each kernel's
// outer loop across the thread pool.
#include <cstring>

#include "runtime/allocator.h"
#include "runtime/blas.h"
#include "runtime/plan.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

// A matmul operand: the dense value, or its transpose in the last two dims as a view.
View operand_view(void* data, const TensorType& t, bool transposed) {
  View v = dense_view(data, t.dtype, t.shape);
  if (transposed && v.rank() >= 2) {
    std::swap(v.shape[v.rank() - 1], v.shape[v.rank() - 2]);
    std::swap(v.strides[v.rank() - 1], v.strides[v.rank() - 2]);
  }
  return v;
}

}  // namespace

void execute_plan(const Plan& plan, void* const* args, void* const* params, void* const* outputs,
                  KeptBuffers* keep) {
  const size_t n = plan.slots.size();
  void* stack_ptrs[32];
  std::vector<void*> heap_ptrs;
  void** ptr = stack_ptrs;
  if (n > 32) {
    heap_ptrs.resize(n);
    ptr = heap_ptrs.data();
  }
  void* temp_stack[16];
  std::vector<void*> temp_heap;
  void** temps = temp_stack;
  const size_t nt = plan.temp_bytes.size();
  if (nt > 16) {
    temp_heap.resize(nt);
    temps = temp_heap.data();
  }
  for (size_t t = 0; t < nt; ++t)
    temps[t] = cpu_alloc(static_cast<size_t>(std::max<int64_t>(plan.temp_bytes[t], 1)));

  for (size_t s = 0; s < n; ++s) {
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

  std::vector<void*> kargs;
  for (const PlanStep& step : plan.steps) {
    if (step.kind == PlanStep::Kernel) {
      void* local[16];
      void** bufs = local;
      if (step.slots.size() > 16) {
        kargs.resize(step.slots.size());
        bufs = kargs.data();
      }
      for (size_t i = 0; i < step.slots.size(); ++i) bufs[i] = ptr[step.slots[i]];
      CpuKernelFn fn = step.fn;
      if (step.range <= step.grain) {
        fn(bufs, 0, step.range);
      } else {
        parallel_for(step.range, step.grain, [&](int64_t b, int64_t e) { fn(bufs, b, e); });
      }
    } else {
      const PlanSlot& a = plan.slots[step.slots[0]];
      const PlanSlot& b = plan.slots[step.slots[1]];
      const PlanSlot& o = plan.slots[step.slots[2]];
      matmul_cpu(operand_view(ptr[step.slots[0]], a.type, step.trans_a),
                 operand_view(ptr[step.slots[1]], b.type, step.trans_b),
                 dense_view(ptr[step.slots[2]], o.type.dtype, o.type.shape));
    }
  }

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

  if (keep) {
    keep->slot_data.assign(ptr, ptr + n);
    keep->temps.assign(temps, temps + nt);
    keep->temp_bytes = plan.temp_bytes;
    return;
  }
  for (size_t t = 0; t < nt; ++t)
    cpu_free(temps[t], static_cast<size_t>(std::max<int64_t>(plan.temp_bytes[t], 1)));
}

void release_kept(KeptBuffers& keep) {
  for (size_t t = 0; t < keep.temps.size(); ++t)
    cpu_free(keep.temps[t], static_cast<size_t>(std::max<int64_t>(keep.temp_bytes[t], 1)));
  keep = {};
}

}  // namespace kiln
