// Runs a program's instruction list as a body function, eagerly (the body
// called directly) and traced (jit of a lambda that calls the body), and
// compares the two runs call by call.
#include "tools/fuzz/differential.h"

#include <cmath>
#include <memory>
#include <sstream>

#include "frontend/autograd.h"
#include "frontend/jit.h"
#include "frontend/optim.h"
#include "tools/fuzz/body.h"

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
  if (p.optimizer == Optimizer::adam) opt = std::make_unique<optim::Adam>(params, 0.01);
  Body body = [&p, &caps, o = opt.get()](const std::vector<Tensor>& args) {
    return run_body(p, caps, args, o);
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
  }
  return r;
}

bool all_zero(const Tensor& t) {
  for (double x : t.to_vector<double>())
    if (x != 0) return false;
  return true;
}

// "" when close, else what differs.
std::string difference(const Tensor& eager, const Tensor& traced, DType dtype,
                       bool undefined_is_zero = false) {
  if (undefined_is_zero && eager.defined() != traced.defined() &&
      all_zero(eager.defined() ? eager : traced))
    return "";
  if (eager.defined() != traced.defined())
    return std::string("eager's is ") + (eager.defined() ? "defined" : "undefined") +
           ", traced's is " + (traced.defined() ? "defined" : "undefined");
  if (!eager.defined()) return "";
  if (eager.sizes() != traced.sizes())
    return "shape " + shape_str(eager.sizes()) + " vs " + shape_str(traced.sizes());
  if (eager.dtype() != traced.dtype())
    return std::string("dtype ") + dtype_name(eager.dtype()) + " vs " + dtype_name(traced.dtype());
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
      return os.str();
    }
  }
  return "";
}

std::optional<Failure> compare(const Program& p, const RunResult& e, const RunResult& t,
                               const CheckOptions& o) {
  if (e.error || t.error) {
    if (e.error && t.error) return std::nullopt;
    return Failure{"throw", e.error ? "eager threw, traced did not:\n  " + *e.error
                                    : "traced threw, eager did not:\n  " + *t.error};
  }
  for (size_t k = 0; k < e.calls.size(); ++k) {
    const Snapshot &a = e.calls[k], &b = t.calls[k];
    const std::string call = "call " + std::to_string(k + 1) + ": ";
    for (size_t i = 0; i < a.outputs.size(); ++i) {
      const std::string what =
          i + 1 == a.outputs.size() ? "the loss" : "output " + std::to_string(i);
      std::string d = difference(a.outputs[i], b.outputs[i], p.dtype);
      if (!d.empty()) return Failure{"output", call + what + ": " + d};
      if (!o.requires_grad && a.output_requires_grad[i] != b.output_requires_grad[i])
        return Failure{"requires_grad", call + what + ".requires_grad(): eager " +
                                            (a.output_requires_grad[i] ? "true" : "false") +
                                            ", traced " +
                                            (b.output_requires_grad[i] ? "true" : "false")};
    }
    for (size_t i = 0; i < a.grads.size(); ++i) {
      const std::string what =
          (p.inputs[i].captured ? "captured input " : "argument input ") + std::to_string(i);
      std::string d = difference(a.grads[i], b.grads[i], p.dtype, o.undefined_grad);
      if (!d.empty()) return Failure{"grad", call + what + ".grad(): " + d};
      d = difference(a.values[i], b.values[i], p.dtype);
      if (!d.empty()) return Failure{"value", call + what + " after the call: " + d};
    }
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
    } else {
      KILN_CHECK(word.empty(), "unknown check '", word,
                 "' (expected undefined-grad or requires-grad)");
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
  } catch (const std::exception& e) {
    v.failure =
        Failure{"exception", std::string("an exception other than kiln::Error: ") + e.what()};
  }
  return v;
}

}  // namespace kiln::fuzz
