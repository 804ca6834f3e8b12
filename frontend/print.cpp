// PyTorch-style repr of tensors: tensor([[1., 2.], [3., 4.]], requires_grad=True).
// Formatting follows torch/_tensor_str.py: integer-valued floats print as "1.",
// otherwise 4 decimals, scientific when the range is wide; rows wrap at 80
// columns; tensors over 1000 elements are summarised with "...".
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "frontend/autograd.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_state.h"

namespace kiln {
namespace {

constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr size_t kLineWidth = 80;

struct Formatter {
  DType dtype;
  bool int_mode = true;
  bool sci_mode = false;
  size_t width = 1;

  Formatter(DType dt, const std::vector<double>& vals) : dtype(dt) {
    if (!is_floating(dt)) {
      for (double v : vals) width = std::max(width, fmt(v).size());
      return;
    }
    double mx = 0, mn = INFINITY;
    bool any = false;
    for (double v : vals) {
      if (!std::isfinite(v)) continue;
      if (v != std::ceil(v)) int_mode = false;
      double a = std::fabs(v);
      if (a == 0) continue;
      any = true;
      mx = std::max(mx, a);
      mn = std::min(mn, a);
    }
    if (any) {
      if (int_mode) {
        sci_mode = mx > 1e8;
      } else {
        sci_mode = mx / mn > 1000.0 || mx > 1e8 || mn < 1e-4;
      }
    }
    for (double v : vals) width = std::max(width, fmt(v).size());
  }

  std::string fmt(double v) const {
    char buf[64];
    if (dtype == DType::b8) return v != 0 ? "True" : "False";
    if (!is_floating(dtype)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode)
      std::snprintf(buf, sizeof buf, "%.4e", v);
    else if (int_mode)
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    else
      std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }
  std::string pad(double v) const {
    std::string s = fmt(v);
    return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
  }
};

// Element values in row-major order, only those that will be printed when summarising.
void collect(const std::vector<double>& all, const Shape& shape, size_t dim, int64_t base,
             bool summarize, std::vector<double>& out) {
  if (dim == shape.size()) {
    out.push_back(all[static_cast<size_t>(base)]);
    return;
  }
  int64_t n = shape[dim], stride = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) stride *= shape[d];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    collect(all, shape, dim + 1, base + i * stride, summarize, out);
  }
}

void render(std::ostream& os, const std::vector<double>& all, const Shape& shape, size_t dim,
            int64_t base, size_t indent, bool summarize, const Formatter& f) {
  int64_t n = shape[dim], stride = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) stride *= shape[d];
  os << '[';
  if (dim + 1 == shape.size()) {
    size_t per_line = std::max<size_t>(1, (kLineWidth - indent) / (f.width + 2));
    size_t on_line = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        os << "...,";
        i = n - kEdgeItems;
        os << ' ';
      }
      if (on_line == per_line) {
        os << '\n' << std::string(indent + 1, ' ');
        on_line = 0;
      }
      os << f.pad(all[static_cast<size_t>(base + i)]);
      if (i + 1 < n) os << (on_line + 1 == per_line ? "," : ", ");
      ++on_line;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        os << "...,\n" << std::string(indent + 1, ' ');
        i = n - kEdgeItems;
      }
      render(os, all, shape, dim + 1, base + i * stride, indent + 1, summarize, f);
      if (i + 1 < n) os << ',' << std::string(shape.size() - dim - 1, '\n') << std::string(indent + 1, ' ');
    }
  }
  os << ']';
}

std::string torch_dtype(DType t) { return std::string("torch.") + dtype_long_name(t); }

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "[ Tensor (undefined) ]";
  const TensorImpl& i = *impl();
  if (i.symbolic()) {
    std::string s = "Tensor(symbolic " + i.type.str() + ", value %" + std::to_string(i.value.node);
    const Node& n = i.trace->graph[i.value.node];
    if (n.loc.known()) s += ", recorded at " + n.loc.str();
    return s + ")";
  }
  std::ostringstream os;
  os << "tensor(";
  std::vector<double> all = to_vector<double>();
  const Shape& shape = i.type.shape;
  bool summarize = numel() > kThreshold;
  if (shape.empty()) {
    Formatter f(i.type.dtype, all);
    os << f.fmt(all[0]);
  } else if (numel() == 0) {
    os << "[]";
  } else {
    std::vector<double> shown;
    collect(all, shape, 0, 0, summarize, shown);
    Formatter f(i.type.dtype, shown);
    render(os, all, shape, 0, 0, 7, summarize, f);
  }
  if (numel() == 0 && shape.size() != 1) {
    os << ", size=(";
    for (size_t d = 0; d < shape.size(); ++d) os << (d ? ", " : "") << shape[d];
    os << (shape.size() == 1 ? ",)" : ")");
  }
  if (!i.type.device.is_cpu()) os << ", device='" << i.type.device.str() << "'";
  DType dt = i.type.dtype;
  if (dt != DType::f32 && dt != DType::i64 && dt != DType::b8) os << ", dtype=" << torch_dtype(dt);
  if (i.grad_fn)
    os << ", grad_fn=<" << grad_fn_name() << "0>";
  else if (i.requires_grad)
    os << ", requires_grad=True";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace kiln
