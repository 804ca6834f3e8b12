// Runs a program's instruction list as a body function, eagerly (the body
// called directly) and traced (jit of a lambda that calls the body), and
// compares the two runs call by call.
#include "tools/fuzz/differential.h"

#include <cmath>
#include <memory>
#include <sstream>

#include "frontend/autograd.h"
#include "frontend/optim.h"
#include "tools/fuzz/body.h"
#include "tools/fuzz/instr.h"
#include "tools/fuzz/oracle.h"

namespace kiln::fuzz {

namespace {

// What one call left behind, copied out.
struct Snapshot {
  std::vector<Tensor> outputs;
  std::vector<bool> output_requires_grad;
  std::vector<Tensor> grads;   // per input
  std::vector<Tensor> values;  // per input, after the call
};

Tensor copy_of(const Tensor& t) {
  NoGradGuard no_grad;
  return t.defined() ? t.detach().clone() : Tensor();
}

struct RunResult {
  std::vector<Snapshot> calls;
  std::optional<std::string> error;  // the kiln::Error that stopped the run
  bool error_located = false;        // it names the source line of the call
  std::string optimizer_mismatch;    // eager Adam against its formula (oracle.h)
  EagerCheck eager;                  // eager results against PyTorch's (oracle.h)
};

RunResult run(const Program& p, bool traced) {
  RunResult r;
  std::vector<Tensor> caps;
  std::vector<Tensor> params;
  for (const Input& in : p.inputs)
    if (in.captured) {
      caps.push_back(make_input(in, p.dtype));
      if (in.requires_grad) params.push_back(caps.back());
    }
  std::unique_ptr<optim::Optimizer> opt;
  if (p.optimizer == Optimizer::sgd) opt = std::make_unique<optim::SGD>(params, 0.1);
  CheckedAdam* checked = nullptr;
  if (p.optimizer == Optimizer::adam) {
    if (traced) {
      opt = std::make_unique<optim::Adam>(params, adam_options());
    } else {
      auto a = std::make_unique<CheckedAdam>(params, adam_options());
      checked = a.get();
      opt = std::move(a);
    }
  }
  EagerCheck* check = traced ? nullptr : &r.eager;
  Body body = [&p, &caps, o = opt.get(), check](const std::vector<Tensor>& args) {
    return run_body(p, caps, args, o, check);
  };
  const size_t nargs = p.inputs.size() - caps.size();
  try {
    Body call = traced ? traced_body(body, nargs).call : body;
    for (int k = 0; k < p.calls; ++k) {
      std::vector<Tensor> args, all;
      size_t c = 0;
      for (const Input& in : p.inputs) {
        if (!in.captured) args.push_back(make_input(in, p.dtype));
        all.push_back(in.captured ? caps[c++] : args.back());
      }
      std::vector<Tensor> outs = call(args);
      if (p.mode == Mode::backward_outside && outs.back().requires_grad()) outs.back().backward();
      Snapshot s;
      for (const Tensor& t : outs) {
        s.outputs.push_back(copy_of(t));
        s.output_requires_grad.push_back(t.requires_grad());
      }
      for (const Tensor& t : all) {
        s.grads.push_back(copy_of(t.grad()));
        s.values.push_back(copy_of(t));
      }
      r.calls.push_back(std::move(s));
    }
  } catch (const Error& e) {
    r.error = e.what();
    r.error_located = e.where().known();
  }
  if (checked) r.optimizer_mismatch = checked->mismatch();
  return r;
}

bool all_zero(const Tensor& t) {
  for (double x : t.to_vector<double>())
    if (x != 0) return false;
  return true;
}

// How an eager and a traced tensor differ: `how` is a short category
// ("defined in eager only", "shape", "dtype", "values"), empty when they agree.
struct Difference {
  std::string how, detail;
};

Difference difference(const Tensor& eager, const Tensor& traced, DType dtype,
                      bool undefined_is_zero = false) {
  if (undefined_is_zero && eager.defined() != traced.defined() &&
      all_zero(eager.defined() ? eager : traced))
    return {};
  if (eager.defined() != traced.defined()) {
    const char* only = eager.defined() ? "eager" : "traced";
    return {std::string("defined in ") + only + " only",
            std::string("defined in ") + only + " only (undefined in the other run)"};
  }
  if (!eager.defined()) return {};
  if (eager.sizes() != traced.sizes())
    return {"shape", "shape " + shape_str(eager.sizes()) + " vs " + shape_str(traced.sizes())};
  if (eager.dtype() != traced.dtype())
    return {"dtype", std::string("dtype ") + dtype_name(eager.dtype()) + " vs " +
                         dtype_name(traced.dtype())};
  const auto x = eager.to_vector<double>(), y = traced.to_vector<double>();
  double scale = 1;
  for (double v : x)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  const bool f32 = dtype == DType::f32;
  const double rtol = f32 ? 1e-3 : 1e-7, atol = (f32 ? 1e-4 : 1e-9) * scale;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool same = x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])) ||
                      std::abs(x[i] - y[i]) <= atol + rtol * std::abs(x[i]);
    if (!same) {
      std::ostringstream os;
      os.precision(17);
      os << "element " << i << ": eager " << x[i] << ", traced " << y[i] << "\n  eager:  " << eager
         << "\n  traced: " << traced;
      return {"values", os.str()};
    }
  }
  return {};
}

// The first line of an error message with numbers and value names blanked, so
// that shrinking keeps "the same error".
std::string error_kind(const std::string& message) {
  std::string out;
  for (char c : message.substr(0, message.find('\n'))) {
    const bool digit = c >= '0' && c <= '9';
    if (!digit || out.empty() || out.back() != '#') out += digit ? '#' : c;
  }
  return out;
}

// The errors PyTorch's autograd raises too, which programs reach without a
// call marked Instr::throws: a backward that needs a value an in-place write
// replaced, or that runs through freed saved tensors a second time.
bool autograd_error(const std::string& message) {
  return message.find("modified by an in-place operation") != std::string::npos ||
         message.find("backward through the graph a second time") != std::string::npos;
}

// The call PyTorch raises at, if the program has one.
const Instr* raising_call(const Program& p) {
  for (const Instr& in : p.instrs)
    if (in.throws) return &in;
  return nullptr;
}

// Errors first: a kiln::Error both ways where PyTorch raises one (at a call
// marked Instr::throws, naming its source line, or from autograd) and nowhere
// else. Then values (outputs, gradients, inputs after the call, call by call),
// eager's results against PyTorch's, and last the outputs' requires_grad()
// flags, so that a flag difference does not hide a wrong number.
std::optional<Failure> compare(const Program& p, const RunResult& e, const RunResult& t,
                               const CheckOptions& o) {
  const Instr* raises = raising_call(p);
  if (e.error || t.error) {
    if (e.error && t.error) {
      if (raises && !e.error_located)
        return Failure{std::string("error without the source line: ") + op_name(raises->op),
                       "PyTorch raises at " + std::string(op_name(raises->op)) +
                           "; Kiln's error does not name the line:\n  " + *e.error};
      if (raises || autograd_error(*e.error)) return std::nullopt;
      // A call the generator did not vouch for (shrinking gave it another
      // operand) may be one PyTorch refuses too.
      const int at = e.eager.threw_at;
      if (at >= 0 && !p.instrs[static_cast<size_t>(at)].shape) return std::nullopt;
      return Failure{"both threw where PyTorch does not: " + error_kind(*e.error),
                     "eager and traced threw where PyTorch does not:\n  " + *e.error};
    }
    const std::string who = e.error ? "eager" : "traced";
    const std::string& msg = e.error ? *e.error : *t.error;
    return Failure{"only " + who + " threw: " + error_kind(msg),
                   who + " threw, the other did not:\n  " + msg};
  }
  if (raises)
    return Failure{
        std::string("no error where PyTorch raises: ") + op_name(raises->op),
        std::string("PyTorch raises at ") + op_name(raises->op) + ", eager and traced ran on"};
  if (!e.eager.mismatch.empty())
    return Failure{"eager differs from PyTorch: " + error_kind(e.eager.mismatch),
                   "eager differs from PyTorch: " + e.eager.mismatch};
  if (!e.optimizer_mismatch.empty())
    return Failure{"the eager Adam step differs from Adam's formula", e.optimizer_mismatch};
  auto output_name = [](size_t i, size_t n) {
    return i + 1 == n ? std::string("the loss") : "output " + std::to_string(i);
  };
  for (size_t k = 0; k < e.calls.size(); ++k) {
    const Snapshot &a = e.calls[k], &b = t.calls[k];
    const std::string call = "call " + std::to_string(k + 1) + ": ";
    for (size_t i = 0; i < a.outputs.size(); ++i) {
      Difference d = difference(a.outputs[i], b.outputs[i], p.dtype);
      if (!d.how.empty())
        return Failure{"output: " + d.how,
                       call + output_name(i, a.outputs.size()) + ": " + d.detail};
    }
    for (size_t i = 0; i < a.grads.size(); ++i) {
      const std::string what =
          (p.inputs[i].captured ? "captured input " : "argument input ") + std::to_string(i);
      Difference d = difference(a.grads[i], b.grads[i], p.dtype, o.undefined_grad);
      if (!d.how.empty()) return Failure{"grad: " + d.how, call + what + ".grad(): " + d.detail};
      d = difference(a.values[i], b.values[i], p.dtype);
      if (!d.how.empty())
        return Failure{"input after the call: " + d.how,
                       call + what + " after the call: " + d.detail};
    }
  }
  for (size_t k = 0; k < e.calls.size() && !o.requires_grad; ++k) {
    const Snapshot &a = e.calls[k], &b = t.calls[k];
    for (size_t i = 0; i < a.outputs.size(); ++i)
      if (a.output_requires_grad[i] != b.output_requires_grad[i])
        return Failure{std::string("output: requires_grad() true in ") +
                           (a.output_requires_grad[i] ? "eager" : "traced") + " only",
                       "call " + std::to_string(k + 1) + ": " + output_name(i, a.outputs.size()) +
                           ".requires_grad(): eager " +
                           (a.output_requires_grad[i] ? "true" : "false") + ", traced " +
                           (b.output_requires_grad[i] ? "true" : "false")};
  }
  return std::nullopt;
}

}  // namespace

CheckOptions parse_ignored(const std::string& list) {
  CheckOptions o;
  std::string rest = list + ",";
  for (size_t at; (at = rest.find(',')) != std::string::npos; rest.erase(0, at + 1)) {
    const std::string word = rest.substr(0, at);
    if (word == "undefined-grad") {
      o.undefined_grad = true;
    } else if (word == "requires-grad") {
      o.requires_grad = true;
    } else if (word == "sparse-indices") {
      o.sparse_indices = true;
    } else {
      KILN_CHECK(word.empty(), "unknown check '", word,
                 "' (expected undefined-grad, requires-grad or sparse-indices)");
    }
  }
  return o;
}

Verdict check_program(const Program& p, const CheckOptions& o) {
  Verdict v;
  try {
    const RunResult eager = run(p, false);
    const RunResult traced = run(p, true);
    v.failure = compare(p, eager, traced, o);
    v.both_threw = !v.failure && eager.error.has_value();
    if (v.both_threw) v.error = *eager.error;
  } catch (const std::exception& e) {
    v.failure =
        Failure{"exception", std::string("an exception other than kiln::Error: ") + e.what()};
  }
  return v;
}

}  // namespace kiln::fuzz
