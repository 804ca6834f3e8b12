// Shrinking a failing program: greedy passes of simplifications (delete an
// instruction, an output or an input; drop requires_grad, the optimizer, the
// second call), each kept when the program still fails the same way.
#include <algorithm>
#include <functional>

#include "tools/fuzz/differential.h"
#include "tools/fuzz/instr.h"

namespace kiln::fuzz {

namespace {

// Renumbers value references after value `gone` is removed; uses of it become
// `replacement` (or the candidate is invalid when there is none, -1). What the
// generator worked out about PyTorch's results (Instr::shape, value, throws)
// no longer holds for a call that reads the replacement, nor downstream of it.
bool remove_value(Program& p, int gone, int replacement) {
  bool replaced = false;
  auto remap = [&](int& v) {
    if (v == gone) {
      if (replacement < 0) return false;
      v = replacement;
      replaced = true;
    }
    if (v > gone) --v;
    return true;
  };
  std::vector<bool> changed(p.inputs.size() + p.instrs.size(), false);
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    Instr& in = p.instrs[i];
    replaced = false;
    for (int& v : in.operands) {
      if (!remap(v)) return false;
      replaced = replaced || changed[static_cast<size_t>(v)];
    }
    if (!replaced) continue;
    changed[p.inputs.size() + i] = true;
    in.shape.reset();
    in.value.reset();
    in.throws = false;
  }
  for (int& v : p.outputs)
    if (!remap(v)) return false;
  std::vector<int> seen;
  for (int v : p.outputs)
    if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
  p.outputs = seen;
  return true;
}

// Every one-step simplification of p, most drastic first.
std::vector<Program> candidates(const Program& p) {
  std::vector<Program> out;
  const int nin = static_cast<int>(p.inputs.size());
  for (int i = static_cast<int>(p.instrs.size()) - 1; i >= 0; --i) {
    // Uses of the deleted value read one of its operands instead.
    const Instr& in = p.instrs[static_cast<size_t>(i)];
    std::vector<int> repls = in.operands;
    if (repls.empty()) repls.push_back(-1);
    for (size_t k = 0; k < repls.size(); ++k) {
      if (std::find(repls.begin(), repls.begin() + static_cast<long>(k), repls[k]) !=
          repls.begin() + static_cast<long>(k))
        continue;
      Program q = p;
      q.instrs.erase(q.instrs.begin() + i);
      if (remove_value(q, nin + i, repls[k])) out.push_back(q);
    }
  }
  for (size_t o = 0; p.outputs.size() > 1 && o < p.outputs.size(); ++o) {
    Program q = p;
    q.outputs.erase(q.outputs.begin() + static_cast<long>(o));
    out.push_back(q);
  }
  for (int i = nin - 1; i >= 0 && nin > 1; --i) {
    Program q = p;
    q.inputs.erase(q.inputs.begin() + i);
    if (remove_value(q, i, -1)) out.push_back(q);
  }
  if (p.calls > 1) {
    Program q = p;
    q.calls = 1;
    out.push_back(q);
  }
  if (p.optimizer != Optimizer::none) {
    Program q = p;
    q.optimizer = Optimizer::none;
    out.push_back(q);
  }
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (p.inputs[i].requires_grad) {
      Program q = p;
      q.inputs[i].requires_grad = false;
      out.push_back(q);
    }
    if (p.inputs[i].captured) {  // an argument is simpler than a captured tensor
      Program q = p;
      q.inputs[i].captured = false;
      if (std::count_if(q.inputs.begin(), q.inputs.end(),
                        [](const Input& x) { return !x.captured; }) <= 3)
        out.push_back(q);
    }
  }
  if (p.dtype == DType::f32) {
    Program q = p;
    q.dtype = DType::f64;
    out.push_back(q);
  }
  return out;
}

}  // namespace

Program shrink(const Program& p, const Failure& failure, const CheckOptions& o, int max_checks) {
  Program best = p;
  int checks = 0;
  bool progress = true;
  while (progress && checks < max_checks) {
    progress = false;
    for (const Program& q : candidates(best)) {
      if (++checks > max_checks) break;
      Verdict v = check_program(q, o);
      if (v.failure && v.failure->kind == failure.kind) {
        best = q;
        progress = true;
        break;
      }
    }
  }
  return best;
}

}  // namespace kiln::fuzz
