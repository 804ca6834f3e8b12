// A program printed as a doctest TEST_CASE that uses Kiln's public API only:
// the body as a lambda, run eagerly and through jit() on copies of the same
// inputs, with a CHECK for every output, .grad() and input value per call.
#include "tools/fuzz/reproducer.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tools/fuzz/instr.h"
#include "tools/fuzz/oracle.h"

namespace kiln::fuzz {

namespace {

std::string input_expr(const Input& in, DType dtype) {
  std::string values, shape;
  for (double x : input_values(in)) values += (values.empty() ? "" : ", ") + number_literal(x);
  for (int64_t d : in.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  std::string opts = std::string("TensorOptions(") +
                     (dtype == DType::f32 ? "kFloat32" : "kFloat64") + ")" +
                     (in.requires_grad ? ".requires_grad(true)" : "");
  return "from_vector({" + values + "}, {" + shape + "}, " + opts + ")";
}

// "{2, 0, 3}".
std::string list(const Shape& s) {
  std::string r;
  for (int64_t d : s) r += (r.empty() ? "" : ", ") + std::to_string(d);
  return "{" + r + "}";
}

// Joins "x<suffix>" for each name.
std::string join(const std::vector<std::string>& names, const std::string& suffix,
                 const std::string& prefix = "") {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + prefix + n + suffix;
  return s;
}

}  // namespace

std::string reproducer(const Program& p, const std::string& title) {
  std::ostringstream os;
  std::vector<std::string> names, args, caps;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    names.push_back((p.inputs[i].captured ? "c" : "a") + std::to_string(i));
    (p.inputs[i].captured ? caps : args).push_back(names.back());
  }
  for (size_t i = 0; i < p.instrs.size(); ++i) names.push_back("v" + std::to_string(names.size()));
  const bool opt = p.optimizer != Optimizer::none;
  const char* tol = p.dtype == DType::f32 ? "1e-3, 1e-4" : "1e-7, 1e-9";

  os << "TEST_CASE(\"" << title << "\") {\n";
  for (size_t i = 0; i < p.inputs.size(); ++i)
    os << "  auto make_" << names[i] << " = [] { return " << input_expr(p.inputs[i], p.dtype)
       << "; };\n";
  os << "  auto make_body = [](" << join(caps, "", "Tensor ")
     << (opt ? std::string(caps.empty() ? "" : ", ") + "optim::Optimizer* opt" : "") << ") {\n";
  os << "    return [=](" << join(args, "", "Tensor ") << ") mutable -> std::vector<Tensor> {\n";
  std::vector<std::string> guards;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const Instr& in = p.instrs[i];
    const std::string& name = names[p.inputs.size() + i];
    if (in.op == Op::nograd_begin) {
      guards.push_back("ng" + name.substr(1));
      os << "      auto " << guards.back() << " = std::make_unique<NoGradGuard>();\n";
    } else if (in.op == Op::nograd_end) {
      if (!guards.empty()) os << "      " << guards.back() << ".reset();\n";
      if (!guards.empty()) guards.pop_back();
    } else {
      os << "      Tensor " << name << " = " << cpp(in, names) << ";\n";
      if (in.shape)
        os << "      CHECK(" << name << ".sizes() == Shape" << list(*in.shape) << ");\n";
      if (in.value)
        os << "      if (!" << name << ".is_symbolic()) CHECK(" << name
           << (std::isnan(*in.value) ? std::string(".isnan()")
                                     : ".eq(" + number_literal(*in.value) + ")")
           << ".all().item<bool>());\n";
    }
  }
  for (auto it = guards.rbegin(); it != guards.rend(); ++it) os << "      " << *it << ".reset();\n";
  os << "      Tensor loss = ";
  std::vector<std::string> outs;
  double w = 1;
  for (size_t k = 0; k < p.outputs.size(); ++k, w /= 2) {
    outs.push_back(names[static_cast<size_t>(p.outputs[k])]);
    os << (k ? " + " : "") << outs.back() << ".sum()" << (k ? " * " + number_literal(w) : "");
  }
  os << ";\n";
  if (p.mode == Mode::backward_inside) {
    os << "      if (loss.requires_grad()) {\n        loss.backward();\n";
    if (opt) os << "        opt->step();\n";
    os << "      }\n";
  }
  outs.push_back("loss");
  os << "      return {" << join(outs, "") << "};\n    };\n  };\n";
  os << "  auto same = [](const Tensor& x, const Tensor& y) {\n"
     << "    return x.defined() == y.defined() && (!x.defined() || allclose(x, y, " << tol
     << "));\n  };\n";
  for (const auto& c : caps)
    os << "  Tensor " << c << "_e = make_" << c << "(), " << c << "_t = make_" << c << "();\n";
  std::string opt_args;
  if (opt) {
    const char* type = p.optimizer == Optimizer::sgd ? "optim::SGD" : "optim::Adam";
    const char* lr = p.optimizer == Optimizer::sgd ? "0.1" : kAdamSpelling;
    std::vector<std::string> params;
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (p.inputs[i].captured && p.inputs[i].requires_grad) params.push_back(names[i]);
    os << "  " << type << " opt_e({" << join(params, "_e") << "}, " << lr << "), opt_t({"
       << join(params, "_t") << "}, " << lr << ");\n";
    opt_args = std::string(caps.empty() ? "" : ", ");
  }
  os << "  auto eager = make_body(" << join(caps, "_e") << (opt ? opt_args + "&opt_e" : "")
     << ");\n";
  os << "  auto traced = jit(make_body(" << join(caps, "_t") << (opt ? opt_args + "&opt_t" : "")
     << "));\n";
  os << "  for (int call = 0; call < " << p.calls << "; ++call) {\n";
  for (const auto& a : args)
    os << "    Tensor " << a << "_e = make_" << a << "(), " << a << "_t = make_" << a << "();\n";
  if (std::any_of(p.instrs.begin(), p.instrs.end(), [](const Instr& in) { return in.throws; })) {
    // PyTorch raises at a call of the body: so must both runs.
    os << "    CHECK_THROWS_AS(eager(" << join(args, "_e") << "), Error);\n";
    os << "    CHECK_THROWS_AS(traced(" << join(args, "_t") << "), Error);\n  }\n}\n";
    return os.str();
  }
  os << "    std::vector<Tensor> out_e = eager(" << join(args, "_e") << "), out_t = traced("
     << join(args, "_t") << ");\n";
  if (p.mode == Mode::backward_outside) {
    os << "    if (out_e.back().requires_grad()) out_e.back().backward();\n";
    os << "    if (out_t.back().requires_grad()) out_t.back().backward();\n";
  }
  os << "    for (size_t i = 0; i < out_e.size(); ++i) CHECK(same(out_e[i], out_t[i]));\n";
  for (const auto& n : std::vector<std::string>(names.begin(), names.begin() + p.inputs.size())) {
    os << "    CHECK(same(" << n << "_e.grad(), " << n << "_t.grad()));\n";
    os << "    CHECK(same(" << n << "_e, " << n << "_t));\n";
  }
  if (p.optimizer == Optimizer::adam && p.dtype == DType::f64) {
    // What CheckedAdam (oracle.h) checks, for the first step.
    os << "    if (call == 0) {  // Adam's first step: p - lr * g / (|g| + eps), in double\n";
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      if (!p.inputs[i].captured || !p.inputs[i].requires_grad) continue;
      const std::string& n = names[i];
      os << "      if (" << n << "_e.grad().defined()) {\n        Tensor g = " << n
         << "_e.grad();\n        CHECK(allclose(" << n << "_e, make_" << n
         << "().detach() - 0.01 * g / (g.abs() + 1e-8), 1e-12, 1e-12));\n      }\n";
    }
    os << "    }\n";
  }
  os << "  }\n}\n";
  return os.str();
}

}  // namespace kiln::fuzz
