// The generator's composites (tools/fuzz/generator.h): libtorch's tensor
// functions of frontend/tensor_extra.h, each on values that suit it.
#include <algorithm>
#include <cmath>

#include "ir/error.h"

#include "tools/fuzz/generator.h"

namespace kiln::fuzz {

std::vector<int64_t> Generator::some_dims(size_t rank, size_t count) {
  std::vector<int64_t> d(rank);
  for (size_t i = 0; i < rank; ++i) d[i] = static_cast<int64_t>(i);
  for (size_t i = rank; i > 1; --i)
    std::swap(d[i - 1], d[static_cast<size_t>(r_.below(int64_t(i)))]);
  d.resize(count);
  return d;
}

bool Generator::composite() {
  const int a = pick_float();
  if (a < 0) return false;
  const Shape& s = val(a).shape;
  const size_t rank = s.size();
  const double ba = val(a).bound;
  const auto sp = [&](int64_t d) { return spelled(d, rank); };
  switch (r_.below(42)) {
    case 34:
      return baddbmm();
    case 35: {  // nan_to_num: NaN and the infinities put in first, replaced
      const int64_t given = r_.below(8);
      push(Instr{Op::nan_to_num, {a}, {given}, 0}, fresh(s, std::max(ba, 3.0)));
      return true;
    }
    case 36: {  // histc over a given range, or an empty tensor's (bins of 0)
      // Of an argument's values as made (multiples of 1/1024; an optimizer steps
      // captured ones): a bin's edge is hit exactly or missed by far more than
      // an ulp, so eager and fused code agree.
      const int g = val(a).group;
      if (g >= static_cast<int>(p_.inputs.size()) || p_.inputs[static_cast<size_t>(g)].captured ||
          std::find(written_.begin(), written_.end(), g) != written_.end())
        return false;
      const int64_t bins = r_.range(1, 5);
      static const double ranges[] = {1.0, 2.5, 4.0};
      const double range = numel(s) == 0 && r_.chance(0.5) ? 0.0 : ranges[r_.below(3)];
      push(Instr{Op::histc, {a}, {bins}, range},
           numel(s) == 0 ? fresh_known({bins}, 0) : fresh({bins}, double(numel(s))));
      return true;
    }
    case 37:
    case 38:
    case 39:
    case 40:
    case 41:
      return join(a);
    case 0: {  // movedim
      if (rank == 0) return false;
      const size_t k = static_cast<size_t>(r_.range(1, static_cast<int64_t>(rank)));
      const std::vector<int64_t> src = some_dims(rank, k), dst = some_dims(rank, k);
      std::vector<int64_t> perm(rank, -1);
      std::vector<bool> moved(rank, false);
      for (size_t i = 0; i < k; ++i) {
        perm[static_cast<size_t>(dst[i])] = src[i];
        moved[static_cast<size_t>(src[i])] = true;
      }
      size_t next = 0;
      for (auto& p : perm) {
        if (p >= 0) continue;
        while (moved[next]) ++next;
        p = static_cast<int64_t>(next++);
      }
      Shape out;
      for (int64_t p : perm) out.push_back(s[static_cast<size_t>(p)]);
      std::vector<int64_t> ints{static_cast<int64_t>(k)};
      for (int64_t d : src) ints.push_back(sp(d));
      for (int64_t d : dst) ints.push_back(sp(d));
      push(Instr{Op::movedim, {a}, ints, 0}, view_of(a, out));
      return true;
    }
    case 1: {  // tensordot over 0 to 2 pairs of dims of equal size
      const int b = pick_float();
      const Shape& t = val(b).shape;
      std::vector<int64_t> da, db;
      std::vector<bool> used(t.size(), false);
      double k = 1;
      for (int64_t d :
           some_dims(rank, std::min<size_t>(rank, static_cast<size_t>(r_.range(0, 2))))) {
        for (size_t e = 0; e < t.size(); ++e)
          if (!used[e] && t[e] == s[static_cast<size_t>(d)]) {
            used[e] = true;
            da.push_back(d);
            db.push_back(static_cast<int64_t>(e));
            k *= static_cast<double>(t[e]);
            break;
          }
      }
      Shape out;
      for (size_t d = 0; d < rank; ++d)
        if (std::find(da.begin(), da.end(), int64_t(d)) == da.end()) out.push_back(s[d]);
      for (size_t e = 0; e < t.size(); ++e)
        if (!used[e]) out.push_back(t[e]);
      const double nb = ba * val(b).bound * k;
      if (numel(out) > kMaxNumel || nb > kMaxBound) return false;
      std::vector<int64_t> ints{static_cast<int64_t>(da.size())};
      for (int64_t d : da) ints.push_back(sp(d));
      for (int64_t d : db) ints.push_back(spelled(d, t.size()));
      push(Instr{Op::tensordot, {a, b}, ints, 0}, k == 0 ? fresh_known(out, 0) : fresh(out, nb));
      return true;
    }
    case 2: {  // rot90
      if (rank < 2) return false;
      const std::vector<int64_t> d = some_dims(rank, 2);
      const int64_t k = r_.range(-2, 5);
      Shape out = s;
      if (k % 2 != 0) std::swap(out[static_cast<size_t>(d[0])], out[static_cast<size_t>(d[1])]);
      push(Instr{Op::rot90, {a}, {k, sp(d[0]), sp(d[1])}, 0}, fresh(out, ba));
      return true;
    }
    case 3: {  // diag: a 1-D tensor onto a diagonal, or a matrix's diagonal
      if (rank == 1) {
        const int64_t k = r_.range(-2, 2), m = s[0] + std::abs(k);
        if (m * m > kMaxNumel) return false;
        push(Instr{Op::diag, {a}, {k}, 0}, fresh({m, m}, ba));
        return true;
      }
      if (rank != 2) return false;
      // (Of an empty matrix, any diagonal from -rows to cols: all are empty.)
      const int64_t k = numel(s) == 0 ? r_.range(-s[0], s[1]) : r_.range(1 - s[0], s[1] - 1);
      const int64_t len = std::min(s[0] - std::max<int64_t>(0, -k), s[1] - std::max<int64_t>(0, k));
      push(Instr{Op::diag, {a}, {k}, 0}, fresh({len}, ba));
      return true;
    }
    case 4: {  // diagonal over two dims
      if (rank < 2) return false;
      const std::vector<int64_t> d = some_dims(rank, 2);
      const int64_t m = s[static_cast<size_t>(d[0])], n = s[static_cast<size_t>(d[1])];
      const int64_t k = m * n == 0 ? r_.range(-m, n) : r_.range(1 - m, n - 1);
      const int64_t len = std::min(m - std::max<int64_t>(0, -k), n - std::max<int64_t>(0, k));
      Shape out;
      for (size_t i = 0; i < rank; ++i)
        if (int64_t(i) != d[0] && int64_t(i) != d[1]) out.push_back(s[i]);
      out.push_back(len);
      push(Instr{Op::diagonal, {a}, {k, sp(d[0]), sp(d[1])}, 0}, fresh(out, ba));
      return true;
    }
    case 5:  // trace
      if (rank != 2) return false;
      push(Instr{Op::trace, {a}, {}, 0},
           numel(s) == 0 ? fresh_known({}, 0)
                         : fresh({}, ba * static_cast<double>(std::min(s[0], s[1]))));
      return true;
    case 6: {  // cross along a dim of size 3
      std::vector<int64_t> threes;
      for (size_t d = 0; d < rank; ++d)
        if (s[d] == 3) threes.push_back(static_cast<int64_t>(d));
      if (threes.empty()) return false;
      const int64_t d = threes[static_cast<size_t>(r_.below(int64_t(threes.size())))];
      const int b = pick([&](const ValueInfo& v) {
        if (v.is_bool || v.shape.size() != rank || !broadcastable(v.shape, s)) return false;
        return true;
      });
      if (b < 0) return false;
      push(Instr{Op::cross, {a, b}, {sp(d)}, 0}, fresh(s, 2 * ba * val(b).bound));
      return true;
    }
    case 7: {  // kron
      const int b = pick_float();
      const Shape& t = val(b).shape;
      const size_t r = std::max(rank, t.size());
      Shape out(r);
      for (size_t i = 0; i < r; ++i) {
        const int64_t x = i + rank >= r ? s[i + rank - r] : 1,
                      y = i + t.size() >= r ? t[i + t.size() - r] : 1;
        out[i] = x * y;
      }
      const double nb = ba * val(b).bound;
      if (numel(out) > kMaxNumel || nb > kMaxBound) return false;
      push(Instr{Op::kron, {a, b}, {}, 0}, fresh(out, nb));
      return true;
    }
    case 8: {  // unfold: windows of `size` every `step` along d, a new last dim
      if (rank == 0) return false;
      const int64_t d = dim_of(a), len = s[static_cast<size_t>(d)];
      if (len == 0) return false;
      const int64_t size = r_.range(1, len), step = r_.range(1, 3);
      Shape out = s;
      out[static_cast<size_t>(d)] = (len - size) / step + 1;
      out.push_back(size);
      if (numel(out) > kMaxNumel) return false;
      // A view, as torch's. Kiln refuses writes into it (its windows may
      // overlap; torch writes into windows that do not), so none are drawn.
      ValueInfo v = view_of(a, out);
      v.overlap = true;
      push(Instr{Op::unfold, {a}, {sp(d), size, step}, 0}, v);
      return true;
    }
    case 9: {  // tile: fewer repeats than dims, as many, or more
      const size_t n = static_cast<size_t>(r_.range(1, static_cast<int64_t>(rank) + 1));
      std::vector<int64_t> reps(n);
      for (auto& x : reps) x = r_.range(1, 3);
      const size_t r = std::max(rank, n);
      Shape out(r);
      for (size_t i = 0; i < r; ++i)
        out[i] = (i + rank >= r ? s[i + rank - r] : 1) * (i + n >= r ? reps[i + n - r] : 1);
      if (numel(out) > kMaxNumel) return false;
      push(Instr{Op::tile, {a}, reps, 0}, fresh(out, ba));
      return true;
    }
    case 10: {  // diff, n times along d
      if (rank == 0) return false;
      const int64_t d = dim_of(a), len = s[static_cast<size_t>(d)];
      if (len < 2) return false;
      const int64_t n = r_.range(1, std::min<int64_t>(len - 1, 3));
      Shape out = s;
      out[static_cast<size_t>(d)] = len - n;
      push(Instr{Op::diff, {a}, {n, sp(d)}, 0}, fresh(out, ba * std::pow(2.0, double(n))));
      return true;
    }
    case 11: {  // cdist
      if (rank < 2) return false;
      const Shape lead(s.begin(), s.end() - 2);
      const int b = pick([&](const ValueInfo& v) {
        if (v.is_bool || v.shape.size() < 2 || v.shape.back() != s.back()) return false;
        try {
          broadcast_shapes(lead, Shape(v.shape.begin(), v.shape.end() - 2));
          return true;
        } catch (const Error&) {
          return false;
        }
      });
      const Shape& t = val(b).shape;  // a itself qualifies
      Shape out = broadcast_shapes(lead, Shape(t.begin(), t.end() - 2));
      out.push_back(s[rank - 2]);
      out.push_back(t[t.size() - 2]);
      static const double ps[] = {1.0, 2.0, 3.0, INFINITY};
      const double p = ps[r_.below(4)];
      if (numel(out) > kMaxNumel) return false;
      push(Instr{Op::cdist, {a, b}, {}, p},
           s.back() == 0 ? fresh_known(out, 0)
                         : fresh(out, static_cast<double>(s.back()) * (ba + val(b).bound)));
      return true;
    }
    case 12: {  // logit
      static const double eps[] = {0.0, 0.0, 0.25, 0.125};
      push(Instr{Op::logit, {a}, {}, eps[r_.below(4)]}, fresh(s, 3));
      return true;
    }
    case 13: {  // xlogy
      const int b = pick_broadcastable(s);
      if (b < 0) return false;
      push(Instr{Op::xlogy, {a, b}, {}, 0}, fresh(broadcast_shapes(s, val(b).shape), ba * 2.1));
      return true;
    }
    case 14:
    case 15:
    case 16:
    case 17: {  // lerp (a tensor weight or a scalar one), addcmul, addcdiv
      const int64_t which = r_.below(4);
      const int b = pick_broadcastable(s);
      if (b < 0) return false;
      const Shape st = broadcast_shapes(s, val(b).shape);
      const double bb = val(b).bound;
      static const double numbers[] = {0.25, 0.75, -0.5, 1.5, 1.0};
      const double x = numbers[r_.below(5)];
      if (which == 1) {
        const double nb = ba + std::abs(x) * (ba + bb);
        if (nb > kMaxBound) return false;
        push(Instr{Op::lerp_scalar, {a, b}, {}, x}, fresh(st, nb));
        return true;
      }
      const int c = pick_broadcastable(st);
      if (c < 0) return false;
      const double bc = val(c).bound;
      const Shape out = broadcast_shapes(st, val(c).shape);
      const Op op = which == 0 ? Op::lerp : which == 2 ? Op::addcmul : Op::addcdiv;
      const double nb = op == Op::lerp      ? ba + bc * (ba + bb)
                        : op == Op::addcmul ? ba + std::abs(x) * bb * bc
                                            : ba + std::abs(x) * bb * 2;
      if (nb > kMaxBound) return false;
      push(Instr{op, {a, b, c}, {}, op == Op::lerp ? 0 : x}, fresh(out, nb));
      return true;
    }
    case 18: {                            // median of all, or along a dim
      if (rank == 0 || r_.chance(0.3)) {  // of no elements: NaN
        push(Instr{Op::median, {a}, {}, 0}, numel(s) == 0 ? fresh_known({}, NAN) : fresh({}, ba));
        return true;
      }
      const int64_t d = dim_of(a);
      const bool keep = r_.chance(0.4);
      const Shape out = reduced_shape(s, d, keep);
      const Instr in{Op::median, {a}, {sp(d)}, keep ? 1.0 : 0.0};
      if (s[static_cast<size_t>(d)] == 0) return raise(in);  // along an empty dim: an error
      push(in, fresh(out, ba));
      return true;
    }
    case 19:
    case 20: {  // std_mean, var_mean over some dims: their sum
      if (rank == 0) return false;
      const size_t k = static_cast<size_t>(r_.range(1, static_cast<int64_t>(rank)));
      const std::vector<int64_t> dims = some_dims(rank, k);
      const bool keep = r_.chance(0.4);
      int64_t count = 1;
      Shape out;
      std::vector<int64_t> spelled_dims;
      for (size_t d = 0; d < rank; ++d) {
        const bool reduced = std::find(dims.begin(), dims.end(), int64_t(d)) != dims.end();
        if (reduced) count *= s[d];
        if (!reduced || keep) out.push_back(reduced ? 1 : s[d]);
      }
      for (int64_t d : dims) spelled_dims.push_back(sp(d));
      const bool unbiased = count > 1 && r_.chance(0.5);
      const bool is_std = r_.chance(0.5);
      const double nb = (is_std ? 2 * ba : 4 * ba * ba) + ba;
      if (nb > kMaxBound) return false;
      push(Instr{is_std ? Op::std_mean : Op::var_mean,
                 {a},
                 spelled_dims,
                 (keep ? 1.0 : 0.0) + (unbiased ? 2.0 : 0.0)},
           count == 0 ? fresh_known(out, NAN) : fresh(out, nb));
      return true;
    }
    case 21: {  // linalg::vector_norm over some dims (or all)
      static const double ords[] = {2.0, 1.0, 3.0, INFINITY, -INFINITY};
      const double ord = ords[r_.below(5)];
      const bool keep = r_.chance(0.4);
      std::vector<int64_t> ints{keep ? 1 : 0};
      Shape out;
      int64_t count = numel(s);  // of the reduced dims
      if (rank == 0 || r_.chance(0.3)) {
        out.assign(keep ? rank : 0, 1);
      } else {
        const std::vector<int64_t> dims =
            some_dims(rank, static_cast<size_t>(r_.range(1, int64_t(rank))));
        for (int64_t d : dims) ints.push_back(sp(d));
        count = 1;
        for (size_t d = 0; d < rank; ++d) {
          const bool reduced = std::find(dims.begin(), dims.end(), int64_t(d)) != dims.end();
          if (!reduced || keep) out.push_back(reduced ? 1 : s[d]);
          if (reduced) count *= s[d];
        }
      }
      const double nb = ba * static_cast<double>(numel(s));
      if (nb > kMaxBound) return false;
      const Instr in{Op::vector_norm, {a}, ints, ord};
      // Of no elements: 0, but the max and min (ord +-inf) have no identity.
      if (count == 0 && std::isinf(ord)) return raise(in);
      push(in, count == 0 ? fresh_known(out, 0) : fresh(out, nb));
      return true;
    }
    case 22: {  // linalg::matrix_norm over two dims
      if (rank < 2) return false;
      static const double ords[] = {0.0, 1.0, -1.0, INFINITY, -INFINITY};
      const double ord = ords[r_.below(5)];
      const std::vector<int64_t> d = some_dims(rank, 2);
      const bool keep = r_.chance(0.4);
      Shape out;
      for (size_t i = 0; i < rank; ++i) {
        const bool reduced = int64_t(i) == d[0] || int64_t(i) == d[1];
        if (!reduced || keep) out.push_back(reduced ? 1 : s[i]);
      }
      const int64_t rows = s[size_t(d[0])], cols = s[size_t(d[1])];
      const double nb = ba * static_cast<double>(rows * cols);
      if (nb > kMaxBound) return false;
      const Instr in{Op::matrix_norm, {a}, {keep ? 1 : 0, sp(d[0]), sp(d[1])}, ord};
      // ord +-1 is the max (min) over dim[1] of the sums over dim[0], +-inf the
      // other way round: of an empty dim PyTorch's amax raises; else a norm of 0.
      if (ord != 0 && (std::isinf(ord) ? rows : cols) == 0) return raise(in);
      push(in, rows * cols == 0 ? fresh_known(out, 0) : fresh(out, nb));
      return true;
    }
    case 23: {  // take, negative positions too
      std::vector<int64_t> ints;
      // Of an empty tensor, only an empty index.
      const Shape out = index_payload(ints, index_shape(numel(s) == 0 || draw_empty()), numel(s));
      push(Instr{Op::take, {a}, ints, 0}, fresh(out, ba));
      return true;
    }
    case 25:
    case 26: {  // addr, addmv: c broadcast to the product, beta 0 leaves it out
      const bool mv = r_.chance(0.5);
      if (rank != (mv ? 2u : 1u)) return false;
      const int b = pick([&](const ValueInfo& v) {
        return !v.is_bool && v.shape.size() == 1 && (!mv || v.shape[0] == s[1]);
      });
      if (b < 0) return false;
      const Shape out = mv ? Shape{s[0]} : Shape{s[0], val(b).shape[0]};
      const int c =
          pick([&](const ValueInfo& v) { return !v.is_bool && broadcastable(v.shape, out); });
      if (c < 0) return false;
      static const double betas[] = {0.0, 1.0, 0.5};
      const double beta = betas[r_.below(3)];
      const int64_t alpha = r_.chance(0.5) ? 1 : -2;
      const double nb = beta * val(c).bound + std::abs(double(alpha)) * ba * val(b).bound *
                                                  (mv ? static_cast<double>(s[1]) : 1.0);
      if (nb > kMaxBound) return false;
      push(Instr{mv ? Op::addmv : Op::addr, {c, a, b}, {alpha}, beta}, fresh(out, nb));
      return true;
    }
    case 27:
    case 28: {  // index_fill, index_copy (a place named twice: the mean)
      if (rank == 0) return false;
      const int64_t d = dim_of(a), size = s[static_cast<size_t>(d)];
      std::vector<int64_t> ints{sp(d)};
      int64_t count = r_.range(1, 3);
      if (size == 0 || draw_empty()) count = 0;  // an empty index: nothing changes
      for (int64_t k = 0; k < count; ++k) ints.push_back(r_.below(size));
      if (r_.chance(0.5)) {
        const double value = r_.chance(0.5) ? 0.5 : -1.25;
        push(Instr{Op::index_fill, {a}, ints, value}, fresh(s, std::max(ba, 1.25)));
        return true;
      }
      Shape src = s;
      src[static_cast<size_t>(d)] = count;
      const int b =
          pick([&](const ValueInfo& v) { return !v.is_bool && broadcastable(v.shape, src); });
      if (b < 0) return false;
      push(Instr{Op::index_copy, {a, b}, ints, 0}, fresh(s, std::max(ba, val(b).bound)));
      return true;
    }
    case 29: {  // copysign, sinc
      if (r_.chance(0.5)) {
        push(Instr{Op::sinc, {a}, {}, 0}, fresh(s, 1));
        return true;
      }
      const int b = pick_broadcastable(s);
      if (b < 0) return false;
      push(Instr{Op::copysign, {a, b}, {}, 0}, fresh(broadcast_shapes(s, val(b).shape), ba));
      return true;
    }
    case 30:
    case 31: {  // nanmean over some dims, aminmax over all or one dim
      if (rank == 0) return false;
      const bool keep = r_.chance(0.4);
      if (r_.chance(0.5)) {
        const std::vector<int64_t> dims =
            some_dims(rank, static_cast<size_t>(r_.range(1, int64_t(rank))));
        Shape out;
        std::vector<int64_t> ints;
        int64_t count = 1;
        for (int64_t d : dims) ints.push_back(sp(d));
        for (size_t d = 0; d < rank; ++d) {
          const bool reduced = std::find(dims.begin(), dims.end(), int64_t(d)) != dims.end();
          if (!reduced || keep) out.push_back(reduced ? 1 : s[d]);
          if (reduced) count *= s[d];
        }
        push(Instr{Op::nanmean, {a}, ints, keep ? 1.0 : 0.0},
             count == 0 ? fresh_known(out, NAN) : fresh(out, ba));
        return true;
      }
      // Of an empty tensor (dim) the min and max have no identity: an error.
      if (r_.chance(0.3)) {
        const Instr in{Op::aminmax, {a}, {}, 0};
        if (numel(s) == 0) return raise(in);
        push(in, fresh({}, 2 * ba));
        return true;
      }
      const int64_t d = dim_of(a);
      const Shape out = reduced_shape(s, d, keep);
      const Instr in{Op::aminmax, {a}, {sp(d)}, keep ? 1.0 : 0.0};
      if (s[static_cast<size_t>(d)] == 0) return raise(in);
      push(in, fresh(out, 2 * ba));
      return true;
    }
    case 32:
    case 33: {  // repeat_interleave, 1 to 3 times, along a dim or flattened
      const int64_t times = r_.range(1, 3);
      if (rank == 0 || r_.chance(0.3)) {
        if (numel(s) * times > kMaxNumel) return false;
        push(Instr{Op::repeat_interleave, {a}, {times}, 0}, fresh({numel(s) * times}, ba));
        return true;
      }
      const int64_t d = dim_of(a);
      Shape out = s;
      out[static_cast<size_t>(d)] *= times;
      if (numel(out) > kMaxNumel) return false;
      push(Instr{Op::repeat_interleave, {a}, {times, sp(d)}, 0}, fresh(out, ba));
      return true;
    }
    default: {  // searchsorted, bucketize: positions, no gradient
      const int b = rank > 1 ? pick([&](const ValueInfo& v) {
        return !v.is_bool && v.shape.size() == rank &&
               std::equal(s.begin(), s.end() - 1, v.shape.begin());
      })
                             : pick_float();
      if (rank == 0 || b < 0) return false;
      const bool right = r_.chance(0.5);
      if (r_.chance(0.5)) {
        // (Into an empty sequence every value goes at 0.)
        push(Instr{Op::searchsorted, {a, b}, {}, right ? 1.0 : 0.0},
             s.back() == 0 ? fresh_known(val(b).shape, 0)
                           : fresh(val(b).shape, static_cast<double>(s.back())));
      } else {
        push(Instr{Op::bucketize, {a, b}, {}, right ? 1.0 : 0.0},
             numel(s) == 0 ? fresh_known(val(b).shape, 0)
                           : fresh(val(b).shape, static_cast<double>(numel(s))));
      }
      return true;
    }
  }
}

}  // namespace kiln::fuzz
