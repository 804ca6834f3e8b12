// The generator's reductions (tools/fuzz/generator.h): sums, means, max and min,
// var, softmax, scans, sort and topk, index_select.
#include <algorithm>
#include <cmath>

#include "tools/fuzz/generator.h"

namespace kiln::fuzz {

bool Generator::reduction() {
  const int a = pick_float();
  if (a < 0) return false;
  const Shape& s = val(a).shape;
  const size_t rank = s.size();
  const double b = val(a).bound;
  const bool keep = r_.chance(0.4);
  const int64_t choice = r_.below(rank == 0 ? 3 : 15);
  if (choice < 3) {
    static const Op all[] = {Op::sum_all, Op::mean_all, Op::max_all};
    const Op op = all[choice];
    const double nb = op == Op::sum_all ? b * static_cast<double>(numel(s)) : b;
    if (nb > kMaxBound) return false;
    if (numel(s) == 0) {  // PyTorch: a sum of nothing is 0, a mean NaN, a max an error
      if (op == Op::max_all) return raise(Instr{op, {a}, {}, 0});
      push(Instr{op, {a}, {}, 0}, fresh_known({}, op == Op::sum_all ? 0.0 : NAN));
      return true;
    }
    push(Instr{op, {a}, {}, 0}, fresh({}, nb));
    return true;
  }
  // Some dims, in random order and spelling; the result drops (or keeps as 1) them.
  std::vector<int64_t> dims;
  std::vector<bool> reduced(rank, false);
  for (size_t d = 0; d < rank; ++d)
    if (r_.chance(0.5)) reduced[d] = true;
  if (std::none_of(reduced.begin(), reduced.end(), [](bool x) { return x; }))
    reduced[static_cast<size_t>(dim_of(a))] = true;
  Shape out;
  int64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      dims.push_back(spelled(static_cast<int64_t>(d), rank));
      count *= s[d];
      if (keep) out.push_back(1);
    } else {
      out.push_back(s[d]);
    }
  }
  if (r_.chance(0.5)) std::reverse(dims.begin(), dims.end());
  const int64_t d0 = dim_of(a);
  const Shape out1 = reduced_shape(s, d0, keep);
  switch (choice) {
    case 3:
    case 4:
      if (b * static_cast<double>(count) > kMaxBound) return false;
      push(Instr{choice == 3 ? Op::sum_dims : Op::mean_dims, {a}, dims, keep ? 1.0 : 0.0},
           count == 0 ? fresh_known(out, choice == 3 ? 0.0 : NAN)
                      : fresh(out, choice == 3 ? b * static_cast<double>(count) : b));
      return true;
    case 5: {
      const Instr in{r_.chance(0.5) ? Op::amax : Op::amin, {a}, dims, keep ? 1.0 : 0.0};
      if (count == 0) return raise(in);  // no identity to give an empty dim
      push(in, fresh(out, b));
      return true;
    }
    case 6: {
      if (4 * b * b > kMaxBound) return false;
      const bool unbiased = count > 1 && r_.chance(0.5);
      push(Instr{Op::var_dims, {a}, dims, (keep ? 1.0 : 0.0) + (unbiased ? 2.0 : 0.0)},
           count == 0 ? fresh_known(out, NAN) : fresh(out, 4 * b * b));
      return true;
    }
    case 7: {
      const Instr in{
          r_.chance(0.5) ? Op::max_dim : Op::min_dim, {a}, {spelled(d0, rank)}, keep ? 1.0 : 0.0};
      if (s[static_cast<size_t>(d0)] == 0) return raise(in);
      push(in, fresh(out1, b));
      return true;
    }
    case 10: {
      const double size = static_cast<double>(s[static_cast<size_t>(d0)]);
      if (b * size > kMaxBound) return false;
      push(Instr{Op::cumsum, {a}, {spelled(d0, rank)}, 0}, fresh(s, b * size));
      return true;
    }
    case 11:
      push(Instr{Op::cumprod_tanh, {a}, {spelled(d0, rank)}, 0}, fresh(s, 1));
      return true;
    case 12:
      push(Instr{Op::logcumsumexp, {a}, {spelled(d0, rank)}, 0},
           fresh(s, b + std::log(std::max<double>(1, double(s[static_cast<size_t>(d0)]))) + 1));
      return true;
    case 14: {
      // All (a sort) or the first few (topk) of dim d0 in order.
      // None of them (topk(0)) now and then with the zero-size feature.
      const int64_t size = s[static_cast<size_t>(d0)];
      int64_t count = size == 0 ? 0 : r_.chance(0.5) ? size : 1 + r_.below(size);
      if (count > 0 && draw_empty()) count = 0;
      Shape out = s;
      out[static_cast<size_t>(d0)] = count;
      push(Instr{Op::sort_values, {a}, {spelled(d0, rank), count}, r_.chance(0.5) ? 1.0 : 0.0},
           fresh(out, b));
      return true;
    }
    case 13: {
      // Some rows of dim d0, in any order, repeats allowed (their gradients add up).
      // An empty index on a dim of size 0, and now and then on another.
      const int64_t size = s[static_cast<size_t>(d0)];
      std::vector<int64_t> ints{spelled(d0, rank)};
      const int64_t count = size == 0 || draw_empty() ? 0 : 1 + r_.below(4);
      for (int64_t k = 0; k < count; ++k) ints.push_back(r_.below(size));
      Shape out = s;
      out[static_cast<size_t>(d0)] = count;
      push(Instr{Op::index_select, {a}, ints, 0}, fresh(out, b));
      return true;
    }
    default: {
      const bool log = choice == 9;
      push(Instr{log ? Op::log_softmax : Op::softmax, {a}, {spelled(d0, rank)}, 0},
           fresh(s, log ? 2 * b + 2 : 1));
      return true;
    }
  }
}

}  // namespace kiln::fuzz
