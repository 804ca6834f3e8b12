// Shared helpers for the runtime tests: dense arrays from literal values,
// views through movement geometry, running one reference kernel with the
// result type the op table infers, and reading any view back as numbers.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "ir/op.h"
#include "runtime/reference.h"
#include "runtime/storage.h"

namespace kiln::test {

/// A dense array that owns its storage; `v` is its (possibly re-strided) view.
struct Arr {
  std::shared_ptr<Storage> storage;
  View v;
  TensorType type() const { return TensorType{v.dtype, v.shape, {}}; }
};

inline Arr empty(DType dt, const Shape& shape) {
  Arr a;
  a.storage = Storage::allocate(size_t(numel(shape)) * dtype_size(dt));
  a.v = dense_view(a.storage->data(), dt, shape);
  return a;
}

/// An array of dtype dt holding `values` (row-major), converted from double.
inline Arr arr(DType dt, const Shape& shape, const std::vector<double>& values) {
  Arr a = empty(dt, shape);
  REQUIRE(int64_t(values.size()) == numel(shape));
  visit_dtype(dt, [&](auto t) {
    using T = decltype(t);
    for (size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        a.v.ptr<T>()[i] = values[i] != 0;
      } else {
        a.v.ptr<T>()[i] = static_cast<T>(values[i]);
      }
    }
  });
  return a;
}

/// An array of standard normal draws from `rng`.
inline Arr randoms(DType dt, const Shape& shape, std::mt19937& rng) {
  std::normal_distribution<double> n(0, 1);
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (double& x : v) x = n(rng);
  return arr(dt, shape, v);
}

inline Arr f32(const Shape& shape, const std::vector<double>& values) {
  return arr(DType::f32, shape, values);
}

/// 0, 1, 2, ... in row-major order.
inline Arr iota(DType dt, const Shape& shape, double start = 0) {
  std::vector<double> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + double(i);
  return arr(dt, shape, v);
}

/// The same storage seen through a movement op's view geometry (permute, slice, expand, reshape).
inline Arr view_as(const Arr& a, OpKind k, const Attrs& attrs) {
  ViewGeometry g;
  REQUIRE(view_geometry(k, attrs, a.v.shape, a.v.strides, &g));
  Arr b = a;
  b.v.data = static_cast<char*>(a.v.data) + g.offset * int64_t(dtype_size(a.v.dtype));
  b.v.shape = g.shape;
  b.v.strides = g.strides;
  return b;
}
inline Arr transposed(const Arr& a) {
  std::vector<int64_t> perm(a.v.shape.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return view_as(a, OpKind::permute, Attrs{{AttrKey::perm, perm}});
}

/// Every element of any view as double, row-major.
inline std::vector<double> values(const View& v) {
  Arr d = empty(DType::f64, v.shape);
  copy_to(v, d.v);
  const double* p = d.v.ptr<double>();
  return std::vector<double>(p, p + d.v.numel());
}
inline std::vector<double> values(const Arr& a) {
  return values(a.v);
}

/// Runs op k on the inputs into a fresh dense result of the type the op table infers.
inline Arr run(OpKind k, const std::vector<Arr>& inputs, const Attrs& attrs = {}) {
  std::vector<TensorType> types;
  std::vector<View> views;
  for (const Arr& a : inputs) {
    types.push_back(a.type());
    views.push_back(a.v);
  }
  TensorType t = infer_type(k, types, attrs);
  Arr out = empty(t.dtype, t.shape);
  reference_kernel(k, attrs, views, out.v);
  return out;
}

/// Runs a creation op into a dense result of the given type.
inline Arr create(OpKind k, DType dt, const Shape& shape, const Attrs& attrs) {
  Arr out = empty(dt, shape);
  reference_kernel(k, attrs, {}, out.v);
  return out;
}

/// Element-wise closeness with NaNs equal to NaNs.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want,
                        double rel = 1e-6, double abs = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CAPTURE(got[i]);
    CAPTURE(want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else if (std::isinf(want[i])) {
      CHECK(got[i] == want[i]);
    } else {
      CHECK(std::fabs(got[i] - want[i]) <= abs + rel * std::fabs(want[i]));
    }
  }
}

// Whole numbers in [-8, 8], a fixed pattern per seed: every product of them in the
// matmul tests is exact in f32 and f64, so results compare with ==.
inline std::vector<double> whole_numbers(int64_t count, int seed) {
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    v[size_t(i)] = double(((i + 1) * (seed * 7919 + 13)) % 17) - 8;
  return v;
}

// out[t] = a[t or 0] @ b[t or 0] over dense row-major batches [batch, n, k] and
// [batch, k, m] (an operand of one batch's size is shared by all).
inline std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b,
                                        int64_t batch, int64_t n, int64_t k, int64_t m) {
  const bool a_shared = int64_t(a.size()) == n * k, b_shared = int64_t(b.size()) == k * m;
  std::vector<double> out(size_t(batch * n * m), 0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += a[size_t(((a_shared ? 0 : t) * n + i) * k + p)] *
               b[size_t(((b_shared ? 0 : t) * k + p) * m + j)];
        out[size_t((t * n + i) * m + j)] = s;
      }
  return out;
}

}  // namespace kiln::test
