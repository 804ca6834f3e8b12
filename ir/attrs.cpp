// Node attributes and their exact text form.
#include "ir/attrs.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <functional>

#include "ir/error.h"

namespace kiln {

namespace {

const char* const kKeyNames[] = {
#define KILN_X(n) #n,
    KILN_ATTR_KEYS(KILN_X)
#undef KILN_X
};

// Names of the AttrValue alternatives, in variant order, for error messages.
const char* const kKindNames[] = {"an int",   "a float",     "a dtype",
                                  "a string", "an int list", "a float list"};

size_t mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

size_t hash_value(const AttrValue& v) {
  size_t h = v.index();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) {
          h = mix(h, std::bit_cast<uint64_t>(x));
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (double d : x) h = mix(h, std::bit_cast<uint64_t>(d));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t d : x) h = mix(h, static_cast<size_t>(d));
        } else if constexpr (std::is_same_v<T, DType>) {
          h = mix(h, static_cast<size_t>(x));
        } else {
          h = mix(h, std::hash<T>()(x));
        }
      },
      v);
  return h;
}

bool same_bits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

bool value_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<double>(&a)) return same_bits(*x, std::get<double>(b));
  if (auto* x = std::get_if<std::vector<double>>(&a)) {
    const auto& y = std::get<std::vector<double>>(b);
    return std::equal(x->begin(), x->end(), y.begin(), y.end(), same_bits);
  }
  return a == b;
}

std::string quote(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string value_str(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          return float_str(x);
        } else if constexpr (std::is_same_v<T, DType>) {
          return dtype_name(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quote(x);
        } else {
          std::string out = "[";
          for (size_t i = 0; i < x.size(); ++i) {
            if (i) out += ',';
            if constexpr (std::is_same_v<T, std::vector<double>>)
              out += float_str(x[i]);
            else
              out += std::to_string(x[i]);
          }
          return out + "]";
        }
      },
      v);
}

}  // namespace

const char* attr_key_name(AttrKey k) {
  return kKeyNames[static_cast<int>(k)];
}

bool parse_attr_key(std::string_view s, AttrKey* out) {
  for (size_t i = 0; i < std::size(kKeyNames); ++i) {
    if (s == kKeyNames[i]) {
      *out = static_cast<AttrKey>(i);
      return true;
    }
  }
  return false;
}

Attrs::Attrs(std::initializer_list<std::pair<AttrKey, AttrValue>> items) {
  for (const auto& [k, v] : items) set(k, v);
}

Attrs& Attrs::set(AttrKey k, AttrValue v) {
  auto it = std::lower_bound(items_.begin(), items_.end(), k,
                             [](const auto& item, AttrKey key) { return item.first < key; });
  if (it != items_.end() && it->first == k)
    it->second = std::move(v);
  else
    items_.insert(it, {k, std::move(v)});
  return *this;
}

const AttrValue* Attrs::find(AttrKey k) const {
  for (const auto& item : items_)
    if (item.first == k) return &item.second;
  return nullptr;
}

bool Attrs::has(AttrKey k) const {
  return find(k) != nullptr;
}

namespace {
template <class T>
const T& get_as(const Attrs& a, AttrKey k, const char* wanted) {
  const AttrValue* v = a.find(k);
  KILN_CHECK(v, "attribute '", attr_key_name(k), "' is missing");
  const T* x = std::get_if<T>(v);
  KILN_CHECK(x, "attribute '", attr_key_name(k), "' is ", kKindNames[v->index()], ", expected ",
             wanted);
  return *x;
}
}  // namespace

int64_t Attrs::i(AttrKey k) const {
  return get_as<int64_t>(*this, k, "an int");
}
int64_t Attrs::i(AttrKey k, int64_t fallback) const {
  return has(k) ? i(k) : fallback;
}

double Attrs::f(AttrKey k) const {
  const AttrValue* v = find(k);
  if (v && std::holds_alternative<int64_t>(*v)) return static_cast<double>(std::get<int64_t>(*v));
  return get_as<double>(*this, k, "a float");
}
double Attrs::f(AttrKey k, double fallback) const {
  return has(k) ? f(k) : fallback;
}

DType Attrs::dtype(AttrKey k) const {
  return get_as<DType>(*this, k, "a dtype");
}
const std::string& Attrs::str(AttrKey k) const {
  return get_as<std::string>(*this, k, "a string");
}
const std::vector<int64_t>& Attrs::ints(AttrKey k) const {
  return get_as<std::vector<int64_t>>(*this, k, "an int list");
}

std::vector<double> Attrs::floats(AttrKey k) const {
  const AttrValue* v = find(k);
  if (v) {
    if (const auto* ints = std::get_if<std::vector<int64_t>>(v))
      return std::vector<double>(ints->begin(), ints->end());
  }
  return get_as<std::vector<double>>(*this, k, "a float list");
}

size_t Attrs::hash() const {
  size_t h = items_.size();
  for (const auto& [k, v] : items_) h = mix(mix(h, static_cast<size_t>(k)), hash_value(v));
  return h;
}

bool operator==(const Attrs& a, const Attrs& b) {
  if (a.items_.size() != b.items_.size()) return false;
  for (size_t i = 0; i < a.items_.size(); ++i) {
    if (a.items_[i].first != b.items_[i].first) return false;
    if (!value_equal(a.items_[i].second, b.items_[i].second)) return false;
  }
  return true;
}

std::string attrs_str(const Attrs& a) {
  if (a.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : a.items()) {
    if (!first) out += ", ";
    first = false;
    out += attr_key_name(k);
    out += '=';
    out += value_str(v);
  }
  return out + "}";
}

std::string float_str(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);  // shortest text that round-trips
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace kiln
