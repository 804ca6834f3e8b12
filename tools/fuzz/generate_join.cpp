// The generator's functions of several tensors (tools/fuzz/generator.h): cat
// (with empty pieces), block_diag, meshgrid, cartesian_prod and combinations.
#include <algorithm>

#include "tools/fuzz/generator.h"

namespace kiln::fuzz {

namespace {

// n choose r, or with repeats (n + r - 1 choose r).
int64_t choose(int64_t n, int64_t r, bool repeats) {
  if (repeats) n += r - 1;
  if (r > n) return 0;
  int64_t c = 1;
  for (int64_t i = 1; i <= r; ++i) c = c * (n - r + i) / i;
  return c;
}

}  // namespace

bool Generator::join(int a) {
  const Shape s = val(a).shape;
  const size_t rank = s.size();
  const int64_t choice = r_.below(5);
  // a, then 0 to 2 more values that `ok` accepts (repeats allowed).
  auto pieces = [&](const std::function<bool(const ValueInfo&)>& ok) {
    std::vector<int> r{a};
    for (int64_t k = r_.range(0, 2); k > 0; --k) {
      const int p = pick(ok);
      if (p >= 0) r.push_back(p);
    }
    return r;
  };
  double bound = 0;
  switch (choice) {
    case 0: {  // cat along d: the pieces agree elsewhere
      if (rank == 0) return false;
      const int64_t d = dim_of(a);
      std::vector<int> ps = pieces([&](const ValueInfo& v) {
        if (v.is_bool || v.shape.size() != rank) return false;
        for (size_t i = 0; i < rank; ++i)
          if (int64_t(i) != d && v.shape[i] != s[i]) return false;
        return true;
      });
      // An empty piece: a narrow of a to nothing, or a 1-D tensor of size 0
      // (PyTorch's cat skips it whatever the other pieces' shapes).
      if (draw_empty(0.3)) {
        const int e = pick([](const ValueInfo& v) { return !v.is_bool && v.shape == Shape{0}; });
        if (e >= 0 && r_.chance(0.5)) {
          ps.insert(ps.begin() + r_.below(int64_t(ps.size()) + 1), e);
        } else {
          Shape o = s;
          o[static_cast<size_t>(d)] = 0;
          const int64_t start = r_.range(0, s[static_cast<size_t>(d)]);
          push(Instr{Op::narrow, {a}, {spelled(d, rank), start, 0}, 0}, view_of(a, o));
          ps.insert(ps.begin() + r_.below(int64_t(ps.size()) + 1), int(vals_.size()) - 1);
        }
      }
      Shape out = s;
      out[static_cast<size_t>(d)] = 0;
      for (int p : ps) {
        if (val(p).shape.size() == rank) out[static_cast<size_t>(d)] += val(p).shape[size_t(d)];
        bound = std::max(bound, val(p).bound);
      }
      if (numel(out) > kMaxNumel) return false;
      push(Instr{Op::cat, std::vector<int>(ps), {spelled(d, rank)}, 0}, fresh(out, bound));
      return true;
    }
    case 1: {  // block_diag of 0-, 1- and 2-D pieces: a 0-D one is 1 x 1, a 1-D one a row
      if (rank > 2) return false;
      const std::vector<int> ps =
          pieces([](const ValueInfo& v) { return !v.is_bool && v.shape.size() <= 2; });
      int64_t rows = 0, cols = 0;
      for (int p : ps) {
        const Shape& t = val(p).shape;
        rows += t.size() == 2 ? t[0] : 1;
        cols += t.empty() ? 1 : t.back();
        bound = std::max(bound, val(p).bound);
      }
      if (rows * cols > kMaxNumel) return false;
      push(Instr{Op::block_diag, std::vector<int>(ps), {}, 0}, fresh({rows, cols}, bound));
      return true;
    }
    case 2: {  // the sum of meshgrid's grids of 0-D and 1-D pieces
      if (rank > 1) return false;
      const std::vector<int> ps =
          pieces([](const ValueInfo& v) { return !v.is_bool && v.shape.size() <= 1; });
      const bool xy = r_.chance(0.5);
      Shape out;
      for (int p : ps) {
        out.push_back(val(p).shape.empty() ? 1 : val(p).shape[0]);
        bound += val(p).bound;
      }
      if (xy && out.size() >= 2) std::swap(out[0], out[1]);
      if (numel(out) > kMaxNumel || bound > kMaxBound) return false;
      // (A grid is a view of its piece: of one piece, the sum is that view.)
      push(Instr{Op::meshgrid, std::vector<int>(ps), {xy ? 1 : 0}, 0},
           ps.size() == 1 ? view_of(a, out) : fresh(out, bound));
      return true;
    }
    case 3: {  // cartesian_prod of 1-D pieces (of one: the piece itself)
      if (rank != 1) return false;
      const std::vector<int> ps =
          pieces([](const ValueInfo& v) { return !v.is_bool && v.shape.size() == 1; });
      int64_t count = 1;
      for (int p : ps) {
        count *= val(p).shape[0];
        bound = std::max(bound, val(p).bound);
      }
      const Shape out = ps.size() == 1 ? Shape{count} : Shape{count, int64_t(ps.size())};
      if (numel(out) > kMaxNumel) return false;
      // (Of one piece PyTorch returns the piece itself.)
      push(Instr{Op::cartesian_prod, std::vector<int>(ps), {}, 0},
           ps.size() == 1 ? view_of(a, out) : fresh(out, bound));
      return true;
    }
    default: {  // combinations of 1 to 3 elements, with or without repeats
      if (rank != 1) return false;
      const int64_t r = r_.range(1, 3);
      const bool repeats = r_.chance(0.5);
      const Shape out{choose(s[0], r, repeats), r};
      if (numel(out) > kMaxNumel) return false;
      push(Instr{Op::combinations, {a}, {r, repeats ? 1 : 0}, 0}, fresh(out, val(a).bound));
      return true;
    }
  }
}

}  // namespace kiln::fuzz
