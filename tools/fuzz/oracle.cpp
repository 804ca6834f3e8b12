// CheckedAdam (see oracle.h).
#include "tools/fuzz/oracle.h"

#include <cmath>
#include <sstream>

#include "tools/fuzz/instr.h"

namespace kiln::fuzz {

std::string pytorch_mismatch(const Instr& in, const Tensor& result) {
  std::ostringstream os;
  os.precision(17);
  if (in.shape && result.sizes() != *in.shape) {
    os << op_name(in.op) << " gave shape " << shape_str(result.sizes()) << ", PyTorch "
       << shape_str(*in.shape);
    return os.str();
  }
  if (!in.value) return "";
  const std::vector<double> v = result.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    const bool same = std::isnan(*in.value) ? std::isnan(v[i]) : v[i] == *in.value;
    if (!same) {
      os << op_name(in.op) << " gave " << v[i] << " at element " << i << ", PyTorch " << *in.value;
      return os.str();
    }
  }
  return "";
}

CheckedAdam::CheckedAdam(std::vector<Tensor> params, optim::AdamOptions options)
    : optim::Adam(std::move(params), options) {
  for (const Tensor& p : parameters()) {
    m_ref_.emplace_back(static_cast<size_t>(p.numel()), 0.0);
    v_ref_.emplace_back(static_cast<size_t>(p.numel()), 0.0);
  }
}

void CheckedAdam::step() {
  const std::vector<Tensor>& ps = parameters();
  // Inside a trace the values do not exist yet: nothing to check.
  const bool check = !ps.empty() && !ps[0].is_symbolic() && ps[0].dtype() == DType::f64;
  std::vector<std::vector<double>> before, grads;
  if (check)
    for (const Tensor& p : ps) {
      before.push_back(p.to_vector<double>());
      grads.push_back(p.grad().defined() ? p.grad().to_vector<double>() : std::vector<double>{});
    }
  optim::Adam::step();
  if (!check) return;
  const double b1 = options.beta1_, b2 = options.beta2_, lr = options.lr_, eps = options.eps_;
  t_ += 1;
  const double bc1 = 1 - std::pow(b1, t_), bc2 = 1 - std::pow(b2, t_);
  for (size_t i = 0; i < ps.size(); ++i) {
    if (grads[i].empty()) continue;
    const std::vector<double> after = ps[i].to_vector<double>();
    for (size_t j = 0; j < after.size(); ++j) {
      const double g = grads[i][j];
      double& m = m_ref_[i][j];
      double& v = v_ref_[i][j];
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      const double want = before[i][j] - lr * (m / bc1) / (std::sqrt(v / bc2) + eps);
      if (mismatch_.empty() && std::abs(after[j] - want) > 1e-12 * std::max(1.0, std::abs(want))) {
        std::ostringstream os;
        os.precision(17);
        os << "Adam step " << t_ << ", parameter " << i << " element " << j << ": " << after[j]
           << ", the formula in double gives " << want;
        mismatch_ = os.str();
      }
    }
  }
}

}  // namespace kiln::fuzz
