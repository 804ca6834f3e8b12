// The generator's advanced indexing (tools/fuzz/generator.h): x.index({...})
// and the index tensors index_put_ and take share.
#include <algorithm>

#include "tools/fuzz/generator.h"

namespace kiln::fuzz {

Shape Generator::index_shape(bool empty) {
  Shape b;
  const int64_t rank = r_.chance(0.15) ? 0 : r_.range(1, 2);
  for (int64_t i = 0; i < rank; ++i) b.push_back(r_.range(1, 3));
  if (empty && b.empty()) b.push_back(0);
  if (empty) b[static_cast<size_t>(r_.below(int64_t(b.size())))] = 0;
  return b;
}

Shape Generator::index_payload(std::vector<int64_t>& ints, const Shape& b, int64_t size) {
  Shape shape = b;
  // (A dim of size 0 takes only an empty index tensor: b itself, which has a 0.)
  if (r_.chance(0.3) && size > 0) {
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
  // An integer cannot index a dim of size 0 (PyTorch raises), an index tensor
  // there must be empty, and the index tensors broadcast: all are empty then.
  bool empty = false;
  for (size_t d = 0; d < used; ++d) {
    if (s[d] == 0 && kinds[d] == 1) kinds[d] = 0;
    empty = empty || (s[d] == 0 && kinds[d] == 3);
  }
  const Shape want = index_shape(empty || draw_empty());
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
      // Empty on a dim of size 0, and now and then on another.
      const bool none = size == 0 || draw_empty();
      const int64_t start = none ? r_.range(0, size) : r_.below(size);
      const int64_t stop = none ? start : r_.range(start + 1, size), step = r_.range(1, 2);
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
