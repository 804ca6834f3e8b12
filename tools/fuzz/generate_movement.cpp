// The generator's views (tools/fuzz/generator.h): reshape, permute, transpose,
// slice, narrow, select, expand, squeeze, unsqueeze, flatten, and clone.
#include <algorithm>
#include <utility>

#include "tools/fuzz/generator.h"

namespace kiln::fuzz {

Shape Generator::reshape_target(int64_t n) {
  Shape out;
  if (n == 0) {  // one dim of size 0 among 0 to 2 others
    for (int64_t i = r_.range(0, 2); i > 0; --i) out.push_back(r_.range(1, 3));
    out.insert(out.begin() + r_.below(int64_t(out.size()) + 1), 0);
    return out;
  }
  for (int64_t f = 2; f <= n; ++f)
    while (n % f == 0) {
      n /= f;
      if (!out.empty() && r_.chance(0.5))
        out.back() *= f;
      else
        out.push_back(f);
    }
  if (out.empty() || r_.chance(0.3)) out.insert(out.begin() + r_.below(out.size() + 1), 1);
  return out;
}

bool Generator::movement() {
  const int a = pick_float();
  if (a < 0) return false;
  const Shape& s = val(a).shape;
  const size_t rank = s.size();
  const int64_t choice = r_.below(11);
  if (rank == 0 && choice != 0 && choice != 6 && choice != 8 && choice != 9) return false;
  const int64_t d = rank ? dim_of(a) : 0;
  const int64_t size = rank ? s[static_cast<size_t>(d)] : 1;
  Shape out = s;
  switch (choice) {
    case 0: {
      out = reshape_target(numel(s));
      Shape spelled_shape = out;
      if (r_.chance(0.3)) {
        size_t at = static_cast<size_t>(r_.below(out.size()));
        // Of 0 elements, only the dim of size 0 may be -1 (else it is ambiguous).
        if (numel(out) == 0)
          at = static_cast<size_t>(std::find(out.begin(), out.end(), 0) - out.begin());
        spelled_shape[at] = -1;
      }
      push(Instr{Op::reshape, {a}, spelled_shape, 0}, view_of(a, out));
      return true;
    }
    case 1: {
      if (rank < 2) return false;
      std::vector<int64_t> perm(rank);
      for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
      for (size_t i = rank - 1; i > 0; --i) std::swap(perm[i], perm[r_.below(i + 1)]);
      for (size_t i = 0; i < rank; ++i) out[i] = s[static_cast<size_t>(perm[i])];
      push(Instr{Op::permute, {a}, perm, 0}, view_of(a, out));
      return true;
    }
    case 2: {
      if (rank < 2) return false;
      const int64_t e = dim_of(a);
      std::swap(out[static_cast<size_t>(d)], out[static_cast<size_t>(e)]);
      if (rank == 2 && r_.chance(0.5)) {
        push(Instr{Op::t, {a}, {}, 0}, view_of(a, {s[1], s[0]}));
        return true;
      }
      push(Instr{Op::transpose, {a}, {spelled(d, rank), spelled(e, rank)}, 0}, view_of(a, out));
      return true;
    }
    case 3: {
      // Empty on a dim of size 0, and now and then on another.
      const bool none = size == 0 || draw_empty();
      const int64_t start = none ? r_.range(0, size) : r_.below(size), step = r_.range(1, 3);
      const int64_t end = none ? start : r_.range(start + 1, size);
      out[static_cast<size_t>(d)] = (end - start + step - 1) / step;
      push(Instr{Op::slice, {a}, {spelled(d, rank), start, end, step}, 0}, view_of(a, out));
      return true;
    }
    case 4: {
      const bool none = size == 0 || draw_empty();
      const int64_t start = none ? r_.range(0, size) : r_.below(size);
      const int64_t len = none ? 0 : r_.range(1, size - start);
      out[static_cast<size_t>(d)] = len;
      push(Instr{Op::narrow, {a}, {spelled(d, rank), start, len}, 0}, view_of(a, out));
      return true;
    }
    case 5: {
      if (size == 0) return raise(Instr{Op::select, {a}, {spelled(d, rank), 0}, 0});
      const int64_t idx = r_.below(size);
      out.erase(out.begin() + d);
      push(Instr{Op::select, {a}, {spelled(d, rank), r_.chance(0.2) ? idx - size : idx}, 0},
           view_of(a, out));
      return true;
    }
    case 6: {
      Shape spelled_shape;
      out.clear();
      if (rank < 3 && r_.chance(0.4)) {
        const int64_t lead = r_.range(2, 3);
        out.push_back(lead);
        spelled_shape.push_back(lead);
      }
      for (int64_t x : s) {
        int64_t y = x == 1 && r_.chance(0.7) ? r_.range(2, 4) : x;
        if (x == 1 && draw_empty(0.05)) y = 0;  // a dim of 1 expands to 0 as well
        out.push_back(y);
        spelled_shape.push_back(y == x && r_.chance(0.3) ? -1 : y);
      }
      if (numel(out) > kMaxNumel) return false;
      ValueInfo v = view_of(a, out);
      v.overlap = numel(out) != numel(s);
      push(Instr{Op::expand, {a}, spelled_shape, 0}, v);
      return true;
    }
    case 7: {
      out.clear();
      if (r_.chance(0.5)) {
        for (int64_t x : s)
          if (x != 1) out.push_back(x);
        push(Instr{Op::squeeze_all, {a}, {}, 0}, view_of(a, out));
        return true;
      }
      if (size == 1) {
        out = s;
        out.erase(out.begin() + d);
      } else {
        out = s;  // squeezing a dim that is not 1 leaves the shape alone
      }
      push(Instr{Op::squeeze_dim, {a}, {spelled(d, rank)}, 0}, view_of(a, out));
      return true;
    }
    case 8: {
      const int64_t at = r_.range(0, static_cast<int64_t>(rank));
      out.insert(out.begin() + at, 1);
      push(Instr{Op::unsqueeze, {a}, {spelled(at, rank + 1)}, 0}, view_of(a, out));
      return true;
    }
    case 9:
      push(Instr{Op::flatten, {a}, {}, 0}, view_of(a, {numel(s)}));
      return true;
    default:
      push(Instr{Op::clone, {a}, {}, 0}, fresh(s, val(a).bound));
      return true;
  }
}

}  // namespace kiln::fuzz
