// PyTorch-style repr of tensors: tensor([[1., 2.], [3., 4.]], requires_grad=True).
// Formatting follows torch/_tensor_str.py: integer-valued floats print as "1.",
// otherwise 4 decimals, scientific when the range is wide; rows wrap at 80
// columns; tensors over 1000 elements are summarised with "...".
#include "frontend/print.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <iomanip>
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

// ---- libtorch's C++ print (TensorPrintStyle::libtorch) ----

std::atomic<TensorPrintStyle> g_print_style{TensorPrintStyle::python};

// libtorch's name of a tensor's type: "CPUFloatType", "CUDALongType".
std::string libtorch_type_name(DType dtype, const Device& device) {
  const char* scalar = "Float";
  switch (dtype) {
    case DType::b8: scalar = "Bool"; break;
    case DType::i32: scalar = "Int"; break;
    case DType::i64: scalar = "Long"; break;
    case DType::f32: scalar = "Float"; break;
    case DType::f64: scalar = "Double"; break;
    case DType::u8: scalar = "Byte"; break;
    case DType::i8: scalar = "Char"; break;
    case DType::i16: scalar = "Short"; break;
  }
  return std::string(device.is_cpu() ? "CPU" : "CUDA") + scalar + "Type";
}

// The column width and scale libtorch gives a block of values (all of a 1-D
// tensor, one matrix of a larger one), with the stream set to its notation:
// whole numbers as they are; otherwise 4 decimals, scientific when the decimal
// exponents of the smallest and largest magnitude are more than 4 apart, and
// a power-of-ten scale line when the largest is 10^5 or more, or below 0.1.
struct ColumnFormat {
  double scale = 1;
  int width = 0;
};
ColumnFormat column_format(std::ostream& os, const double* v, size_t n) {
  ColumnFormat f;
  if (n == 0) return f;
  bool whole = true;
  for (size_t i = 0; i < n && whole; ++i)
    if (std::isfinite(v[i]) && v[i] != std::ceil(v[i])) whole = false;
  size_t first = 0;
  while (first < n && !std::isfinite(v[first])) ++first;
  double exp_min = 1, exp_max = 1;
  if (first < n) {
    double lo = std::fabs(v[first]), hi = lo;
    for (size_t i = first; i < n; ++i) {
      const double a = std::fabs(v[i]);
      if (!std::isfinite(a)) continue;
      lo = std::min(lo, a);
      // libtorch compares the signed value with the largest magnitude so far,
      // so a negative value never raises it: kept, for the same columns.
      if (v[i] > hi) hi = a;
    }
    if (lo != 0) exp_min = std::floor(std::log10(lo)) + 1;
    if (hi != 0) exp_max = std::floor(std::log10(hi)) + 1;
  }
  if (whole) {
    if (exp_max > 9) {
      f.width = 11;
      os << std::scientific << std::setprecision(4);
    } else {
      f.width = static_cast<int>(exp_max) + 1;
      os.unsetf(std::ios_base::floatfield);
    }
  } else if (exp_max - exp_min > 4) {
    f.width = std::fabs(exp_max) > 99 || std::fabs(exp_min) > 99 ? 12 : 11;
    os << std::scientific << std::setprecision(4);
  } else {
    if (exp_max > 5 || exp_max < 0) {
      f.width = 7;
      f.scale = std::pow(10, exp_max - 1);
    } else {
      f.width = exp_max == 0 ? 7 : static_cast<int>(exp_max) + 6;
    }
    os << std::fixed << std::setprecision(4);
  }
  return f;
}

void print_scale(std::ostream& os, double scale) {
  const std::ios_base::fmtflags flags = os.flags();
  os.unsetf(std::ios_base::floatfield);
  os << scale << " *\n";
  os.flags(flags);
}

// One [rows, cols] matrix, indented, in blocks of as many columns as fit in
// 80 characters ("Columns 1 to 10" heads each block, on the line of its first
// row, as libtorch writes it).
void print_matrix(std::ostream& os, const double* v, int64_t rows, int64_t cols, int indent) {
  const ColumnFormat f = column_format(os, v, static_cast<size_t>(rows * cols));
  const std::string pad(static_cast<size_t>(indent), ' ');
  os << pad;
  const int64_t per_line = std::max<int64_t>(1, (80 - indent) / (f.width + 1));
  for (int64_t first = 0; first < cols;) {
    const int64_t last = std::min(first + per_line, cols) - 1;
    if (per_line < cols) {
      if (first != 0) os << '\n';
      os << "Columns " << first + 1 << " to " << last + 1 << pad;
    }
    if (f.scale != 1) {
      print_scale(os, f.scale);
      os << pad;
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = first; c <= last; ++c) {
        os << std::setw(f.width) << v[r * cols + c] / f.scale;
        if (c < last) {
          os << ' ';
          continue;
        }
        os << '\n';
        if (r + 1 < rows) os << pad << (f.scale != 1 ? " " : "");
      }
    }
    first = last + 1;
  }
}

}  // namespace

void set_tensor_print_style(TensorPrintStyle style) { g_print_style = style; }
TensorPrintStyle tensor_print_style() { return g_print_style; }

std::string libtorch_str(const Tensor& t) {
  if (!t.defined()) return "[ Tensor (undefined) ]";
  if (t.impl()->symbolic()) return t.str();
  const TensorImpl& impl = *t.impl();
  const Shape& shape = impl.type.shape;
  const std::vector<double> all = t.to_vector<double>();
  std::ostringstream os;
  if (shape.empty()) {
    os << all[0] << '\n';
  } else if (shape.size() == 1 && !all.empty()) {
    const ColumnFormat f = column_format(os, all.data(), all.size());
    if (f.scale != 1) print_scale(os, f.scale);
    for (double v : all) os << std::setw(f.width) << v / f.scale << '\n';
  } else if (shape.size() == 2 && !all.empty()) {
    print_matrix(os, all.data(), shape[0], shape[1], 0);
  } else if (!all.empty()) {
    // Every matrix of the leading dims, the first dim counting fastest (as
    // libtorch's counter does), headed "(i,j,.,.) = ".
    const size_t lead = shape.size() - 2;
    const int64_t matrix = shape[lead] * shape[lead + 1];
    std::vector<int64_t> index(lead, 0);
    for (bool first = true;; first = false) {
      if (!first) {
        size_t d = 0;
        while (d < lead && ++index[d] == shape[d]) index[d++] = 0;
        if (d == lead) break;
        os << '\n';
      }
      int64_t offset = 0;
      os << '(';
      for (size_t d = 0; d < lead; ++d) {
        offset = offset * shape[d] + index[d];
        os << index[d] + 1 << ',';
      }
      os << ".,.) = \n";
      print_matrix(os, all.data() + offset * matrix, shape[lead], shape[lead + 1], 1);
    }
  }
  os << "[ " << libtorch_type_name(impl.type.dtype, impl.type.device) << '{';
  for (size_t d = 0; d < shape.size(); ++d) os << (d ? "," : "") << shape[d];
  os << "} ]";
  return os.str();
}

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

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << (g_print_style == TensorPrintStyle::libtorch ? libtorch_str(t) : t.str());
}

}  // namespace kiln
