// The generator's advanced indexing (tools/fuzz/generator.h): x.index({...})
// and the index tensors index_put_ and take share.
#include <algorithm>

#include "tools/fuzz/generator.h"

namespace kiln::fuzz {

Shape Generator::index_shape() {
  Shape b;
  const int64_t rank = r_.chance(0.15) ? 0 : r_.range(1, 2);
  for (int64_t i = 0; i < rank; ++i) b.push_back(r_.range(1, 3));
  return b;
}

Shape Generator::index_payload(std::vector<int64_t>& ints, const Shape& b, int64_t size) {
  Shape shape = b;
  if (r_.chance(0.3)) {
    shape.assign(b.end() - r_.range(0, static_cast<int64_t>(b.size())), b.end());
    for (auto& d : shape)
      if (r_.chance(0.3)) d = 1;
  }
  ints.push_back(static_cast<int64_t>(shape.size()));
  ints.insert(ints.end(), shape.begin(), shape.end());
  for (int64_t i = 0; i < numel(shape); ++i) ints.push_back(r_.range(-size, size - 1));
  return shape;
}

bool Generator::advanced_index() {
  const int a = pick([](const ValueInfo& v) { return !v.is_bool && !v.shape.empty(); });
  if (a < 0) return false;
  const Shape& s = val(a).shape;
  const size_t used = static_cast<size_t>(r_.range(1, static_cast<int64_t>(s.size())));
  std::vector<int64_t> kinds(used);
  int tensors = 0;
  for (auto& k : kinds) {
    const int64_t x = r_.below(100);
    k = x < 45 && tensors < 3 ? 3 : x < 60 ? 1 : x < 80 ? 0 : 2;
    tensors += k == 3;
  }
  if (tensors == 0) kinds[static_cast<size_t>(r_.below(static_cast<int64_t>(used)))] = 3;
  const Shape want = index_shape();
  std::vector<int64_t> ints;
  Shape kept, b;           // the dims after the integers' selects; B
  std::vector<size_t> at;  // where the picked dims are among them
  for (size_t d = 0; d < s.size(); ++d) {
    const int64_t size = s[d];
    const int64_t kind = d < used ? kinds[d] : 0;
    if (d < used) ints.push_back(kind);
    if (kind == 1) {
      ints.push_back(r_.range(-size, size - 1));
    } else if (kind == 2) {
      const int64_t start = r_.below(size), stop = r_.range(start + 1, size), step = r_.range(1, 2);
      ints.insert(ints.end(), {start, stop, step});
      kept.push_back((stop - start + step - 1) / step);
    } else if (kind == 3) {
      at.push_back(kept.size());
      kept.push_back(size);
      b = broadcast_shapes(b, index_payload(ints, want, size));
    } else {
      kept.push_back(size);
    }
  }
  bool adjacent = true;
  for (size_t j = 1; j < at.size(); ++j) adjacent = adjacent && at[j] == at[0] + j;
  Shape out;
  const bool in_place = adjacent && at[0] != 0 && !b.empty();
  if (!in_place) out = b;
  for (size_t d = 0; d < kept.size(); ++d) {
    if (in_place && d == at[0]) out.insert(out.end(), b.begin(), b.end());
    if (std::find(at.begin(), at.end(), d) == at.end()) out.push_back(kept[d]);
  }
  if (numel(out) > kMaxNumel) return false;
  push(Instr{Op::index_adv, {a}, ints, 0}, fresh(out, val(a).bound));
  return true;
}

}  // namespace kiln::fuzz
