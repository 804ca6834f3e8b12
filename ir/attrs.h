// Node attributes: a small sorted list of (key, value) pairs. Keys are a fixed
// enum so lookups are cheap; values are self-describing in the IR text
// (integers print without a '.', floats always with one).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

// X-macro of attribute keys: KILN_ATTR(name).
#define KILN_ATTR_KEYS(X) \
  X(index)                \
  X(value)                \
  X(data)                 \
  X(dtype)                \
  X(dims)                 \
  X(keepdim)              \
  X(dim)                  \
  X(shape)                \
  X(perm)                 \
  X(start)                \
  X(end)                  \
  X(step)                 \
  X(low)                  \
  X(high)                 \
  X(interior)             \
  X(fn)                   \
  X(name)                 \
  X(reduce)               \
  X(root)                 \
  X(world)                \
  X(bucket)               \
  X(bucket_bytes)         \
  X(reverse)              \
  X(descending)           \
  X(count)                \
  X(scale)                \
  X(causal)               \
  X(which)                \
  X(size)                 \
  X(dilation)

enum class AttrKey : uint8_t {
#define KILN_X(n) n,
  KILN_ATTR_KEYS(KILN_X)
#undef KILN_X
};

const char* attr_key_name(AttrKey k);
bool parse_attr_key(std::string_view s, AttrKey* out);

/// One attribute value: an integer, a float, a dtype, a string, or a list of ints or floats.
using AttrValue =
    std::variant<int64_t, double, DType, std::string, std::vector<int64_t>, std::vector<double>>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<AttrKey, AttrValue>> items);

  /// Sets (or replaces) a value; keeps the list sorted by key.
  Attrs& set(AttrKey k, AttrValue v);
  bool has(AttrKey k) const;
  const AttrValue* find(AttrKey k) const;

  // Typed getters throw kiln::Error when the key is missing or of another type.
  int64_t i(AttrKey k) const;
  int64_t i(AttrKey k, int64_t fallback) const;
  double f(AttrKey k) const;  // accepts an integer too
  double f(AttrKey k, double fallback) const;
  DType dtype(AttrKey k) const;
  const std::string& str(AttrKey k) const;
  const std::vector<int64_t>& ints(AttrKey k) const;
  std::vector<double> floats(AttrKey k) const;  // accepts a list of ints too

  const std::vector<std::pair<AttrKey, AttrValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  size_t hash() const;
  /// Bitwise equality for floats (so NaN == NaN and -0.0 != 0.0), as hash-consing needs.
  friend bool operator==(const Attrs& a, const Attrs& b);

 private:
  std::vector<std::pair<AttrKey, AttrValue>> items_;
};

/// "{dims=[1], keepdim=1}" or "" when empty. Floats print exactly (round-trip).
std::string attrs_str(const Attrs& a);
/// Exact, round-trippable float text that always contains '.', 'e', "nan" or "inf".
std::string float_str(double v);

}  // namespace kiln
