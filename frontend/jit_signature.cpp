// A traced function's signature cache: what keys an entry (signature_of), why
// a call missed (miss_reason), and whether an entry's guards still hold.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "frontend/alias.h"
#include "frontend/autograd.h"
#include "frontend/jit_entry.h"

namespace kiln::detail {

namespace {

std::string grad_state_str(uint8_t s) {
  return s == 0 ? "requires_grad false" : s == 1 ? "a leaf that requires grad" : "computed by ops that require grad";
}

std::string number_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The same numbers, NaN equal to NaN (a number read as a constant may be NaN).
bool same_numbers(const std::vector<double>& a, const std::vector<double>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); });
}

// Whether a constant guard still holds; if not, why (the numbers that changed).
bool constants_hold(const ConstantGuard& g, std::string* reason) {
  if (g.alive.expired()) {
    *reason = g.what + ": their owner was destroyed since the trace";
    return false;
  }
  const std::vector<double> now = g.read();
  if (same_numbers(now, g.expected)) return true;
  std::ostringstream changed;
  const char* sep = "";
  for (size_t i = 0; i < std::min(now.size(), g.expected.size()); ++i) {
    if (now[i] == g.expected[i]) continue;
    changed << sep;
    if (i < g.names.size())
      changed << g.names[i];
    else
      changed << '#' << i;
    changed << " " << number_str(g.expected[i]) << " -> " << number_str(now[i]);
    sep = ", ";
  }
  *reason = g.what + " changed: " + changed.str() +
            " (numbers a traced function reads as constants)";
  return false;
}

}  // namespace

bool TracedCore::Signature::operator==(const Signature& o) const {
  return types == o.types && requires_grad == o.requires_grad && grad_mode == o.grad_mode &&
         same_numbers(numbers, o.numbers);
}

// Why a call did not match a cached signature (compared with the most recent entry).
std::string miss_reason(const TracedCore::Signature& now, const TracedCore::Signature& was) {
  [[maybe_unused]] const auto& [pt, prg, pn, pgm, is_tensor] = was;
  size_t ti = 0, ni = 0;
  for (size_t p = 0; p < now.is_tensor.size(); ++p) {
    std::string arg = "arg " + std::to_string(p);
    if (now.is_tensor[p]) {
      if (ti >= pt.size()) return arg + ": new argument";
      const TensorType &n = now.types[ti], &w = pt[ti];
      if (w.shape != n.shape)
        return arg + ": shape " + shape_str(w.shape) + " -> " + shape_str(n.shape);
      if (w.dtype != n.dtype)
        return arg + ": dtype " + dtype_name(w.dtype) + " -> " + dtype_name(n.dtype);
      if (w.device != n.device) return arg + ": device " + w.device.str() + " -> " + n.device.str();
      if (prg[ti] != now.requires_grad[ti])
        return arg + ": " + grad_state_str(prg[ti]) + " -> " +
               grad_state_str(now.requires_grad[ti]);
      ++ti;
    } else {
      if (ni < pn.size() && pn[ni] != now.numbers[ni])
        return arg + " (a number, traced as a constant): " + number_str(pn[ni]) + " -> " +
               number_str(now.numbers[ni]);
      ++ni;
    }
  }
  if (now.grad_mode != pgm)
    return std::string("grad mode ") + (pgm ? "on" : "off") + " -> " +
           (now.grad_mode ? "on" : "off");
  return "signature evicted from the cache";
}

// The call's signature, as the cache keys it.
TracedCore::Signature signature_of(const TraceArgs& args, const std::string& name,
                                   SourceLoc where) {
  TracedCore::Signature sig{{}, {}, args.numbers, grad_mode_enabled(), args.is_tensor};
  for (size_t i = 0; i < args.tensors.size(); ++i) {
    const Tensor& t = args.tensors[i];
    if (!t.defined())
      throw Error(
          "traced function '" + name + "': tensor argument " + std::to_string(i) + " is undefined",
          where);
    sig.types.push_back(t.impl()->type);
    // Its autograd state, a view's after writes into its base (2, computed by
    // ops: an in-place write into it is allowed).
    detail::sync_view(*t.impl());
    sig.requires_grad.push_back(autograd_state(*t.impl()));
  }
  return sig;
}

// Whether the conditions an entry was traced under still hold; if not, why
// (of its .grad guards, the last that fails).
bool guards_hold(const TracedCore::Entry& e, std::string* reason) {
  bool hold = true;
  for (const GradGuard& g : e.guards) {
    if (g.tensor->grad.get() != g.expected_grad) {
      hold = false;
      *reason = std::string("a captured tensor's .grad changed (") +
                (g.expected_grad ? "defined" : "undefined") + " -> " +
                (g.tensor->grad ? "defined" : "undefined") + ")";
    } else if (g.expect_zero && !known_zero(*g.tensor->grad)) {
      hold = false;
      *reason = "a captured tensor's .grad was written since the plan left it zero";
    }
  }
  for (size_t c = 0; hold && c < e.constant_guards.size(); ++c)
    hold = constants_hold(e.constant_guards[c], reason);
  for (size_t p = 0; hold && p < e.traced.params.size(); ++p)
    if (autograd_state(*e.traced.params[p]) != e.param_grad_state[p]) {
      hold = false;
      *reason = "a captured tensor's requires_grad or history changed since it was traced";
    }
  return hold;
}

}  // namespace kiln::detail
