// Reference kernels for gather and scatter_add (ir/ops.def's indexing rows):
// loops over the indices' shape that read, or add into, only the elements the
// indices name. scatter_add folds the contributions to each output element in
// index order (row-major over the indices), in parallel over output columns
// (the positions outside `dim`), as the compiled kernels do, so every mode gives
// the same bits.
#include <algorithm>

#include "ir/error.h"
#include "runtime/reference.h"
#include "runtime/reference_impl.h"
#include "runtime/thread_pool.h"

namespace kiln::detail {
namespace {

constexpr int64_t kIndexGrain = 1 << 14;

// Positions of `shape` in row-major order from `first`: coordinates kept up to
// date by an odometer, and the element offsets of each view at them.
class Odometer {
 public:
  Odometer(const Shape& shape, std::vector<const View*> views, int64_t first)
      : shape_(shape), views_(std::move(views)), coord_(shape.size(), 0), off_(views_.size(), 0) {
    int64_t rest = first;
    for (size_t d = shape_.size(); d-- > 0;) {
      coord_[d] = shape_[d] == 0 ? 0 : rest % shape_[d];
      rest = shape_[d] == 0 ? 0 : rest / shape_[d];
    }
    for (size_t v = 0; v < views_.size(); ++v)
      for (size_t d = 0; d < shape_.size(); ++d) off_[v] += coord_[d] * views_[v]->strides[d];
  }
  const std::vector<int64_t>& coord() const { return coord_; }
  int64_t offset(size_t view) const { return off_[view]; }
  void next() {
    for (size_t d = shape_.size(); d-- > 0;) {
      for (size_t v = 0; v < views_.size(); ++v) off_[v] += views_[v]->strides[d];
      if (++coord_[d] < shape_[d]) return;
      for (size_t v = 0; v < views_.size(); ++v) off_[v] -= coord_[d] * views_[v]->strides[d];
      coord_[d] = 0;
    }
  }

 private:
  Shape shape_;
  std::vector<const View*> views_;
  std::vector<int64_t> coord_;
  std::vector<int64_t> off_;
};

// The index at element offset `at` of an integer view, checked against [0, n).
int64_t index_at(const View& index, int64_t at, int64_t n, const char* op) {
  int64_t i = 0;
  visit_dtype(index.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      i = static_cast<int64_t>(index.ptr<T>()[at]);
  });
  KILN_CHECK(i >= 0 && i < n, op, ": index ", i, " is out of range for size ", n,
             " (expected 0 <= index < ", n, ")");
  return i;
}

// a + b as the add op computes it: integers wrap, bools or.
template <class T>
T add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

}  // namespace

void ref_gather(const Attrs& attrs, const View& x, const View& index, const View& out) {
  KILN_CHECK(out.shape == index.shape, "gather: output ", shape_str(out.shape), " for indices ",
             shape_str(index.shape));
  if (out.numel() == 0) return;
  const int64_t d = normalize_dim(attrs.i(AttrKey::dim), std::max<int64_t>(x.rank(), 1));
  const int64_t n = x.rank() == 0 ? 1 : x.shape[static_cast<size_t>(d)];
  const int64_t xs = x.rank() == 0 ? 0 : x.strides[static_cast<size_t>(d)];
  visit_dtype(x.dtype, [&](auto t) {
    using T = decltype(t);
    visit_dtype(index.dtype, [&](auto it) {
      using I = decltype(it);
      if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
        const I* idx = index.ptr<I>();
        const T* xp = x.ptr<T>();
        T* op = out.ptr<T>();
        // Rows of the last dim: an odometer over the rest, a strided loop along it.
        // x's offset at the index's position has coordinate d taken out: x and the
        // index share coordinates everywhere else.
        View x_rest = x;
        if (x.rank() > 0) x_rest.strides[static_cast<size_t>(d)] = 0;
        const int64_t r = out.rank();
        const int64_t w = r == 0 ? 1 : out.shape[size_t(r - 1)];
        const int64_t xw = r == 0 ? 0 : x_rest.strides[size_t(r - 1)],
                      iw = r == 0 ? 0 : index.strides[size_t(r - 1)],
                      ow = r == 0 ? 0 : out.strides[size_t(r - 1)];
        const Shape rows(out.shape.begin(), out.shape.end() - (r == 0 ? 0 : 1));
        parallel_for(numel(rows), std::max<int64_t>(1, kIndexGrain / w),
                     [&](int64_t begin, int64_t end) {
                       Odometer row(rows, {&x_rest, &index, &out}, begin);
                       for (int64_t p = begin; p < end; ++p, row.next())
                         for (int64_t c = 0; c < w; ++c) {
                           const int64_t at = row.offset(1) + c * iw;
                           const int64_t i = int64_t(idx[at]);
                           if (i < 0 || i >= n) index_at(index, at, n, "gather");  // throws
                           op[row.offset(2) + c * ow] = xp[row.offset(0) + c * xw + i * xs];
                         }
                     });
      }
    });
  });
}

void ref_scatter_add(const Attrs& attrs, const View& base, const View& index, const View& src,
                     const View& out) {
  KILN_CHECK(out.shape == base.shape && src.shape == index.shape, "scatter_add: output ",
             shape_str(out.shape), ", base ", shape_str(base.shape), ", indices ",
             shape_str(index.shape), ", source ", shape_str(src.shape));
  if (base.data != out.data || base.strides != out.strides) copy_to(base, out);  // else in place
  if (index.numel() == 0) return;
  const int64_t rank = base.rank();
  const int64_t d = normalize_dim(attrs.i(AttrKey::dim), std::max<int64_t>(rank, 1));
  const int64_t n = rank == 0 ? 1 : base.shape[static_cast<size_t>(d)];
  const int64_t os = rank == 0 ? 0 : out.strides[static_cast<size_t>(d)];
  // The columns: the indices' positions with dim d taken out; each folds its
  // contributions in order along d, and no two columns write one element.
  Shape columns = index.shape;
  int64_t along = 1;
  if (rank > 0) along = columns[static_cast<size_t>(d)], columns[static_cast<size_t>(d)] = 1;
  auto step = [&](const View& v) {
    return rank == 0 ? int64_t(0) : v.strides[static_cast<size_t>(d)];
  };
  const int64_t is = step(index), ss = step(src);
  View out_rest = out;
  if (rank > 0) out_rest.strides[static_cast<size_t>(d)] = 0;
  // Columns go in tiles: for each step m along d, a tile's columns are added
  // together (neighbours in memory when the columns are the inner dims, as in an
  // embedding's gradient), each column's contributions still in order of m.
  constexpr int64_t kTile = 256;
  visit_dtype(out.dtype, [&](auto t) {
    using T = decltype(t);
    visit_dtype(index.dtype, [&](auto it) {
      using I = decltype(it);
      if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
        const I* idx = index.ptr<I>();
        const T* sp = src.ptr<T>();
        T* op = out.ptr<T>();
        parallel_for(
            numel(columns), std::max<int64_t>(1, kIndexGrain / std::max<int64_t>(along, 1)),
            [&](int64_t begin, int64_t end) {
              int64_t oo[kTile], io[kTile], so[kTile];
              Odometer col(columns, {&out_rest, &index, &src}, begin);
              for (int64_t c0 = begin; c0 < end; c0 += kTile) {
                const int64_t w = std::min(kTile, end - c0);
                for (int64_t c = 0; c < w; ++c, col.next())
                  oo[c] = col.offset(0), io[c] = col.offset(1), so[c] = col.offset(2);
                // A tile of evenly spaced columns sharing each step's index (an
                // embedding's gradient: one token's row): one index a step and
                // a plain (vectorisable) add of two runs.
                const int64_t oc = w > 1 ? oo[1] - oo[0] : 0, sc = w > 1 ? so[1] - so[0] : 0;
                bool rows = true;
                for (int64_t c = 1; c < w && rows; ++c)
                  rows = io[c] == io[0] && oo[c] - oo[c - 1] == oc && so[c] - so[c - 1] == sc;
                if (rows) {
                  for (int64_t m = 0; m < along; ++m) {
                    const int64_t i = int64_t(idx[io[0] + m * is]);
                    if (i < 0 || i >= n) index_at(index, io[0] + m * is, n, "scatter_add");
                    T* o = op + oo[0] + i * os;
                    const T* x = sp + so[0] + m * ss;
                    if (oc == 1 && sc == 1)
                      for (int64_t c = 0; c < w; ++c) o[c] = add(o[c], x[c]);
                    else
                      for (int64_t c = 0; c < w; ++c) o[c * oc] = add(o[c * oc], x[c * sc]);
                  }
                  continue;
                }
                for (int64_t m = 0; m < along; ++m)
                  for (int64_t c = 0; c < w; ++c) {
                    const int64_t i = int64_t(idx[io[c] + m * is]);
                    if (i < 0 || i >= n)
                      index_at(index, io[c] + m * is, n, "scatter_add");  // throws
                    T& o = op[oo[c] + i * os];
                    o = add(o, sp[so[c] + m * ss]);
                  }
              }
            });
      }
    });
  });
}

}  // namespace kiln::detail
