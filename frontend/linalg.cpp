// torch.linalg's det, inv and solve (and torch::det, torch::inverse): LU with
// partial pivoting on the host, in float64, eagerly. The pivots depend on the
// values, so a traced function cannot hold them: inside a trace they are an
// error naming the line. Gradients come from table ops around the computed
// values: with C = inv(A) held constant, C - C (A - A') C is C in value
// (A' is A detached, A - A' is 0) and has inv's derivative -C dA C; det and
// solve are built the same way.
#include <cmath>
#include <string>
#include <vector>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/trace_state.h"

namespace kiln {

using detail::here;

namespace {

// One n x n matrix (row-major) factored in place as P A = L U: `perm` the rows'
// order, `sign` that of the permutation; `singular` when a pivot is 0.
struct Lu {
  std::vector<double> a;
  std::vector<int64_t> perm;
  double sign = 1;
  bool singular = false;
};

Lu factor(const double* m, int64_t n) {
  Lu f{std::vector<double>(m, m + n * n), std::vector<int64_t>(static_cast<size_t>(n))};
  for (int64_t i = 0; i < n; ++i) f.perm[size_t(i)] = i;
  auto at = [&](int64_t r, int64_t c) -> double& { return f.a[size_t(r * n + c)]; };
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = k;
    for (int64_t r = k + 1; r < n; ++r)
      if (std::abs(at(r, k)) > std::abs(at(p, k))) p = r;
    if (at(p, k) == 0) {
      f.singular = true;
      continue;
    }
    if (p != k) {
      for (int64_t c = 0; c < n; ++c) std::swap(at(p, c), at(k, c));
      std::swap(f.perm[size_t(p)], f.perm[size_t(k)]);
      f.sign = -f.sign;
    }
    for (int64_t r = k + 1; r < n; ++r) {
      const double m = at(r, k) / at(k, k);
      at(r, k) = m;
      for (int64_t c = k + 1; c < n; ++c) at(r, c) -= m * at(k, c);
    }
  }
  return f;
}

// Solves A x = b for the k columns of b (row-major n x k), in place.
void solve_factored(const Lu& f, int64_t n, int64_t k, double* b) {
  std::vector<double> x(size_t(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) x[size_t(r * k + c)] = b[f.perm[size_t(r)] * k + c];
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < r; ++j)
        x[size_t(r * k + c)] -= f.a[size_t(r * n + j)] * x[size_t(j * k + c)];
    for (int64_t r = n - 1; r >= 0; --r) {
      for (int64_t j = r + 1; j < n; ++j)
        x[size_t(r * k + c)] -= f.a[size_t(r * n + j)] * x[size_t(j * k + c)];
      x[size_t(r * k + c)] /= f.a[size_t(r * n + r)];
    }
  }
  std::copy(x.begin(), x.end(), b);
}

// A's checks: eager, floating, square in its last two dims.
void check_square(const Tensor& A, const char* op, Loc l) {
  if (current_trace())
    throw Error(std::string(op) +
                    ": LU's pivots depend on the values, which a traced function's plan cannot "
                    "branch on: call " +
                    op + " outside the traced function",
                here(l));
  if (!A.defined()) throw Error(std::string(op) + ": an undefined tensor", here(l));
  if (!is_floating(A.dtype()))
    throw Error(std::string(op) + ": expected a floating tensor, got " + dtype_name(A.dtype()),
                here(l));
  if (A.dim() < 2 || A.size(-1) != A.size(-2))
    throw Error(std::string(op) + ": expected square matrices [..., n, n], got shape " +
                    shape_str(A.sizes()),
                here(l));
}

std::vector<double> host_values(const Tensor& t, Loc l) {
  return t.detach().contiguous(l).to_vector<double>(l);
}

Tensor from_host(const std::vector<double>& v, Shape shape, const Tensor& like, Loc l) {
  return from_vector(v, std::move(shape), TensorOptions(like.dtype()).device(like.device()), l);
}

bool taping(const Tensor& a, const Tensor& b = Tensor()) {
  return grad_mode_enabled() && (a.requires_grad() || (b.defined() && b.requires_grad()));
}

// The inverses of A's matrices; an error naming the first singular one.
Tensor inverse_values(const Tensor& A, const char* op, Loc l) {
  const int64_t n = A.size(-1), count = numel(Shape(A.sizes().begin(), A.sizes().end() - 2));
  std::vector<double> a = host_values(A, l), out(a.size());
  for (int64_t b = 0; b < count && n > 0; ++b) {  // 0 x 0 matrices: nothing to factor
    const Lu f = factor(a.data() + size_t(b * n * n), n);
    if (f.singular)
      throw Error(std::string(op) + ": matrix " + std::to_string(b) +
                      " is singular (a zero pivot in its LU factorization), so it has no inverse",
                  here(l));
    double* x = out.data() + size_t(b * n * n);
    for (int64_t i = 0; i < n; ++i) x[i * n + i] = 1;
    solve_factored(f, n, n, x);
  }
  return from_host(out, A.sizes(), A, l);
}

// X + the first-order change of A (and B) around their values: the gradient path.
Tensor moved(const Tensor& t) {
  return t.sub(t.detach());
}

}  // namespace

namespace linalg {

Tensor det(const Tensor& A, Loc l) {
  check_square(A, "linalg.det", l);
  const int64_t n = A.size(-1), count = numel(Shape(A.sizes().begin(), A.sizes().end() - 2));
  std::vector<double> a = host_values(A, l), d(size_t(count), 1.0);
  for (int64_t b = 0; b < count && n > 0; ++b) {  // 0 x 0 matrices: nothing to factor
    const Lu f = factor(a.data() + size_t(b * n * n), n);
    if (f.singular) {
      d[size_t(b)] = 0;
      continue;
    }
    d[size_t(b)] = f.sign;
    for (int64_t i = 0; i < n; ++i) d[size_t(b)] *= f.a[size_t(i * n + i)];
  }
  Shape batch(A.sizes().begin(), A.sizes().end() - 2);
  const Tensor value = from_host(d, batch, A, l);
  if (!taping(A)) return value;
  // d det = det * sum(inv(A)^T * dA).
  const Tensor C = inverse_values(A, "linalg.det's gradient", l);
  return value.add(value.mul(C.transpose(-1, -2, l).mul(moved(A), l).sum({-2, -1}, false, l), l), 1,
                   l);
}

Tensor inv(const Tensor& A, Loc l) {
  check_square(A, "linalg.inv", l);
  const Tensor C = inverse_values(A, "linalg.inv", l);
  if (!taping(A)) return C;
  return C.sub(C.matmul(moved(A), l).matmul(C, l), 1, l);
}

Tensor solve(const Tensor& A, const Tensor& B, bool left, Loc l) {
  check_square(A, "linalg.solve", l);
  if (!B.defined() || B.dtype() != A.dtype())
    throw Error("linalg.solve: expected B of A's dtype " + std::string(dtype_name(A.dtype())) +
                    (B.defined() ? ", got " + std::string(dtype_name(B.dtype()))
                                 : ", got an undefined tensor"),
                here(l));
  // B [..., n] (a vector per matrix, A's batch) solves as a column [..., n, 1].
  const bool vector = B.dim() == 1 || (B.dim() == A.dim() - 1 &&
                                       B.sizes() == Shape(A.sizes().begin(), A.sizes().end() - 1));
  if (vector && !left)
    throw Error("linalg.solve: left=false expects B to be a matrix [..., k, n]", here(l));
  const Tensor Bm = vector ? B.unsqueeze(-1, l) : B;
  const int64_t n = A.size(-1);
  if (Bm.dim() < 2 || Bm.size(left ? -2 : -1) != n)
    throw Error("linalg.solve: A is " + shape_str(A.sizes()) + " but B is " + shape_str(B.sizes()) +
                    (left ? " (expected B [..., n, k] or [..., n])" : " (expected B [..., k, n])"),
                here(l));
  // X A = B is A^T X^T = B^T.
  const Tensor At = left ? A : A.transpose(-1, -2, l), Bt = left ? Bm : Bm.transpose(-1, -2, l);
  Shape batch = broadcast_shapes(Shape(At.sizes().begin(), At.sizes().end() - 2),
                                 Shape(Bt.sizes().begin(), Bt.sizes().end() - 2));
  const int64_t k = Bt.size(-1);
  Shape as = batch, bs = batch;
  as.insert(as.end(), {n, n});
  bs.insert(bs.end(), {n, k});
  const Tensor Ae = At.expand(as, l), Be = Bt.expand(bs, l);
  std::vector<double> a = host_values(Ae, l), x = host_values(Be, l);
  const int64_t count = numel(batch);
  for (int64_t b = 0; b < count && n > 0; ++b) {  // 0 x 0 matrices: nothing to factor
    const Lu f = factor(a.data() + size_t(b * n * n), n);
    if (f.singular)
      throw Error("linalg.solve: matrix " + std::to_string(b) +
                      " of A is singular (a zero pivot in its LU factorization)",
                  here(l));
    solve_factored(f, n, k, x.data() + size_t(b * n * k));
  }
  Tensor X = from_host(x, bs, A, l);
  if (taping(A, B)) {
    // d X = C (dB - dA X).
    const Tensor C = inverse_values(Ae, "linalg.solve's gradient", l);
    X = X.add(C.matmul(moved(Be).sub(moved(Ae).matmul(X.detach(), l), 1, l), l), 1, l);
  }
  if (!left) X = X.transpose(-1, -2, l);
  return vector ? X.squeeze(-1, l) : X;
}

}  // namespace linalg

Tensor det(const Tensor& x, Loc l) {
  return linalg::det(x, l);
}
Tensor inverse(const Tensor& x, Loc l) {
  return linalg::inv(x, l);
}
Tensor Tensor::det(Loc l) const {
  return linalg::det(*this, l);
}
Tensor Tensor::inverse(Loc l) const {
  return linalg::inv(*this, l);
}

}  // namespace kiln
