// nn modules and losses.
#include "frontend/nn.h"

#include <cxxabi.h>

#include <cmath>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <typeinfo>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"
#include "runtime/reference.h"

namespace kiln::nn {

OrderedDict<std::string, Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<std::string, Tensor> out(params_.begin(), params_.end());
  if (recurse)
    for (const auto& [cname, child] : children_)
      for (auto& [pname, p] : child->named_parameters(true)) out.emplace_back(cname + "." + pname, p);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters(recurse)) out.push_back(p);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, m] : named_modules("", include_self)) out.push_back(m);
  return out;
}

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_modules(const std::string& prefix,
                                                                        bool include_self) {
  OrderedDict<std::string, std::shared_ptr<Module>> out;
  if (include_self) {
    // A module not held by a shared_ptr (a plain `Net net;`) is listed unowned.
    std::shared_ptr<Module> self = weak_from_this().lock();
    out.emplace_back(prefix,
                     self ? self : std::shared_ptr<Module>(std::shared_ptr<Module>(), this));
  }
  for (auto& [cname, child] : children_)
    for (auto& item : child->named_modules(prefix.empty() ? cname : prefix + "." + cname, true))
      out.push_back(item);
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [n, c] : children_) c->apply(fn);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none)
      p.set_grad(Tensor());
    else
      p.grad().zero_();
  }
}

void Module::to(Device device, Loc loc) {
  const SourceLoc where = detail::here(loc);
  if (current_trace())
    throw Error("Module::to(" + device.str() +
                    ") inside a traced function (expected it before tracing: a compiled "
                    "function reads its parameters where they are)",
                where);
  // Every distinct tensor to move: parameters with their gradients, then buffers
  // (a tensor registered twice, as tied weights are, moves once).
  std::vector<Tensor> todo;
  auto add = [&](const Tensor& t) {
    if (!t.defined()) return;
    for (const Tensor& u : todo)
      if (u.impl() == t.impl()) return;
    todo.push_back(t);
  };
  for (const Tensor& p : parameters()) {
    add(p);
    if (p.defined()) add(p.grad());
  }
  for (const Tensor& b : buffers()) add(b);
  // Copy everything first, so that an error leaves every tensor where it was.
  NoGradGuard no_grad;
  std::vector<Tensor> moved;
  for (const Tensor& t : todo) moved.push_back(t.device() == device ? Tensor() : t.to(device, loc));
  for (size_t i = 0; i < todo.size(); ++i) {
    if (!moved[i].defined()) continue;
    TensorImpl& t = *todo[i].impl();
    const TensorImpl& m = *moved[i].impl();
    const uint64_t version = t.buffer->version;
    // The handle keeps its identity and autograd state; only the data moves. The
    // new buffer's version is past the old one's, so a backward that would read
    // the old data (saved by a forward before the move) is an error, not a mix.
    t.buffer = m.buffer;
    t.buffer->version = version + 1;
    t.offset = m.offset;
    t.strides = m.strides;
    t.type.device = m.type.device;
    t.alias.reset();  // a moved view owns its data now
  }
}

void Module::to(DType dtype, bool, Loc loc) {
  const SourceLoc where = detail::here(loc);
  if (current_trace())
    throw Error(std::string("Module::to(") + dtype_name(dtype) +
                    ") inside a traced function (expected it before tracing)",
                where);
  if (!is_floating(dtype))
    throw Error(std::string("Module::to(") + dtype_name(dtype) +
                    "): expected a floating dtype (a module's parameters stay floating)",
                where);
  std::vector<Tensor> todo;
  auto add = [&](const Tensor& t) {
    if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == dtype) return;
    for (const Tensor& u : todo)
      if (u.impl() == t.impl()) return;
    todo.push_back(t);
  };
  for (const Tensor& p : parameters()) {
    add(p);
    if (p.defined()) add(p.grad());
  }
  for (const Tensor& b : buffers()) add(b);
  NoGradGuard no_grad;
  std::vector<Tensor> converted;
  for (const Tensor& t : todo) converted.push_back(t.to(dtype, loc).contiguous(loc));
  for (size_t i = 0; i < todo.size(); ++i) {
    TensorImpl& t = *todo[i].impl();
    const TensorImpl& c = *converted[i].impl();
    const uint64_t version = t.buffer->version;
    // As in to(device): the handle stays, the data is replaced.
    t.buffer = c.buffer;
    t.buffer->version = version + 1;
    t.offset = c.offset;
    t.strides = c.strides;
    t.type.dtype = c.type.dtype;
    t.alias.reset();
  }
}

Tensor& Module::register_parameter(std::string name, Tensor t, bool requires_grad) {
  if (requires_grad && !t.requires_grad()) t.requires_grad_(true);
  params_.emplace_back(std::move(name), std::move(t));
  return params_.back().second;
}

LinearImpl::LinearImpl(int64_t in, int64_t out, bool with_bias)
    : Module("Linear"), in_features(in), out_features(out) {
  if (in <= 0 || out <= 0)
    throw Error("Linear(" + std::to_string(in) + ", " + std::to_string(out) +
                "): feature counts must be positive");
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  NoGradGuard no_grad;
  weight = register_parameter("weight", rand({out, in}) * (2 * bound) - bound);
  if (with_bias) bias = register_parameter("bias", rand({out}) * (2 * bound) - bound);
}

Tensor LinearImpl::forward(const Tensor& x, Loc loc) {
  if (x.dim() == 0 || x.size(-1) != in_features)
    throw Error("Linear: expected input with last dim " + std::to_string(in_features) +
                    ", got shape " + shape_str(x.sizes()),
                SourceLoc::from(loc));
  Tensor y = x.matmul(weight.t(loc), loc);
  return bias.defined() ? y.add(bias, 1, loc) : y;
}

std::string LinearImpl::repr() const {
  return "Linear(in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false") + ")";
}

Tensor SequentialImpl::forward(const Tensor& x, Loc loc) {
  Tensor y = x;
  for (auto& f : steps_) y = f(y, loc);
  return y;
}

std::string SequentialImpl::repr() const {
  std::ostringstream os;
  os << "Sequential(\n";
  for (auto& [n, c] : children_) os << "  (" << n << "): " << c->repr() << "\n";
  os << ")";
  return os.str();
}

namespace functional {

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction r, Loc loc) {
  if (input.sizes() != target.sizes())
    throw Error("mse_loss: input shape " + shape_str(input.sizes()) + " and target shape " +
                    shape_str(target.sizes()) + " differ (expected the same shape)",
                SourceLoc::from(loc));
  Tensor d = input.sub(target, 1, loc);
  return apply_reduction(d.mul(d, loc), r, loc);
}

namespace {

Tensor one_hot_of_checked(const Tensor& indices, int64_t n, Loc loc) {
  Tensor classes = arange(n, TensorOptions(indices.dtype()), loc);
  return indices.unsqueeze(-1, loc).eq(classes, loc);
}

}  // namespace

Tensor one_hot(const Tensor& indices, int64_t num_classes, Loc loc) {
  // int64, as torch.nn.functional.one_hot gives.
  return one_hot_of_checked(detail::checked_indices(indices, num_classes, "one_hot", loc),
                            num_classes, loc)
      .to(kInt64, loc);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction r, Loc loc) {
  CrossEntropyOptions o;
  o.reduction = r;
  return cross_entropy(logits, target, o, loc);
}

}  // namespace functional

Tensor MSELossImpl::forward(const Tensor& input, const Tensor& target, Loc loc) {
  return functional::mse_loss(input, target, reduction, loc);
}

CrossEntropyLossImpl::CrossEntropyLossImpl(const CrossEntropyOptions& o)
    : Module("CrossEntropyLoss"),
      reduction(o.reduction),
      ignore_index(o.ignore_index),
      label_smoothing(o.label_smoothing) {}

Tensor CrossEntropyLossImpl::forward(const Tensor& logits, const Tensor& target, Loc loc) {
  CrossEntropyOptions o;
  o.reduction = reduction;
  o.ignore_index = ignore_index;
  o.label_smoothing = label_smoothing;
  return functional::cross_entropy(logits, target, o, loc);
}

namespace utils {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       Loc loc) {
  const SourceLoc where = detail::here(loc);
  if (!(max_norm >= 0) || std::isnan(norm_type) || norm_type <= 0)
    throw Error("clip_grad_norm_: expected max_norm >= 0 and norm_type > 0, got max_norm " +
                    std::to_string(max_norm) + ", norm_type " + std::to_string(norm_type),
                where);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return zeros({}, kFloat32);
  const bool inf = std::isinf(norm_type);
  Tensor total;  // inf: the largest magnitude; else the sum of |g|^p, rooted below
  for (const Tensor& g : grads) {
    if (g.device() != grads[0].device() || g.dtype() != grads[0].dtype())
      throw Error("clip_grad_norm_: gradients on " + grads[0].device().str() + " " +
                      dtype_name(grads[0].dtype()) + " and " + g.device().str() + " " +
                      dtype_name(g.dtype()) + " (expected one device and dtype)",
                  where);
    Tensor part = inf ? g.abs(loc).max(loc)
                      : norm_type == 2 ? g.mul(g, loc).sum(loc) : g.abs(loc).pow(norm_type, loc).sum(loc);
    total = !total.defined() ? part : inf ? total.maximum(part, loc) : total.add(part, 1, loc);
  }
  if (!inf) total = norm_type == 2 ? total.sqrt(loc) : total.pow(1.0 / norm_type, loc);
  Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0, loc);
  for (Tensor& g : grads) g.mul_(coef, loc);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value, Loc loc) {
  if (!(clip_value >= 0))
    throw Error("clip_grad_value_: expected clip_value >= 0, got " + std::to_string(clip_value),
                detail::here(loc));
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) g.clamp_(-clip_value, clip_value, loc);
  }
}

}  // namespace utils

std::shared_ptr<Module> Module::clone(const std::optional<Device>&) const {
  throw Error(name_ + ": clone() is not defined for this module (Kiln copies Linear, LayerNorm, "
              "Dropout, MultiheadAttention, TransformerEncoderLayer and TransformerEncoder; a "
              "module of one's own overrides clone(), returning copied_into(a new module))");
}

std::shared_ptr<Module> Module::copied_into(std::shared_ptr<Module> fresh,
                                            const std::optional<Device>& device) const {
  NoGradGuard no_grad;
  auto copy = [&](const OrderedDict<std::string, Tensor>& from, OrderedDict<std::string, Tensor> to,
                  const char* what) {
    if (from.size() != to.size())
      throw Error(name_ + ": clone() made a module with " + std::to_string(to.size()) + " " + what +
                  ", this one has " + std::to_string(from.size()));
    for (const auto& item : from) {
      Tensor* t = to.find(item.key());
      if (!t || !t->defined() || !item.value().defined() || t->sizes() != item.value().sizes())
        throw Error(name_ + ": clone() made a module whose " + what + " '" + item.key() +
                    "' is missing or of another shape");
      t->copy_(item.value().to(t->device()).to(item.value().dtype()));
      if (t->requires_grad() != item.value().requires_grad())
        t->requires_grad_(item.value().requires_grad());
    }
  };
  copy(named_parameters(), fresh->named_parameters(), "parameters");
  copy(named_buffers(), fresh->named_buffers(), "buffers");
  // The training mode of every descendant, in the same order.
  std::vector<std::shared_ptr<Module>> mine = const_cast<Module*>(this)->modules(),
                                       theirs = fresh->modules();
  for (size_t i = 0; i < mine.size() && i < theirs.size(); ++i)
    theirs[i]->training_ = mine[i]->training_;
  if (device) fresh->to(*device);
  return fresh;
}

std::string Module::repr() const {
  std::string name = name_;
  if (name == "Module") {  // a class of the user's: its own name
    int status = 0;
    char* d = abi::__cxa_demangle(typeid(*this).name(), nullptr, nullptr, &status);
    if (status == 0 && d) name = d;
    std::free(d);
  }
  if (children_.empty()) return name + "()";
  std::string out = name + "(\n";
  for (const auto& [n, c] : children_) {
    std::string child = c->repr();
    for (size_t p = child.find('\n'); p != std::string::npos; p = child.find('\n', p + 3))
      child.replace(p, 1, "\n  ");
    out += "  (" + n + "): " + child + "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

}  // namespace kiln::nn
