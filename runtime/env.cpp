// Strict parsing of the KILN_* environment switches (see env.h).
#include "runtime/env.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

#include "ir/error.h"

namespace kiln::env {
namespace {

[[noreturn]] void bad(const char* name, const std::string& value, const std::string& expected) {
  throw Error(std::string(name) + "=" + value + ": expected " + expected +
              " (unset it for the default)");
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

bool flag(const char* name, bool fallback) {
  std::optional<std::string> v = get(name);
  if (!v) return fallback;
  const std::string s = lower(*v);
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  bad(name, *v, "1, true, on or yes, or 0, false, off or no");
}

int64_t integer(const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  std::optional<std::string> v = get(name);
  if (!v) return fallback;
  int64_t n = 0;
  const char* end = v->data() + v->size();
  auto [ptr, ec] = std::from_chars(v->data(), end, n);
  if (ec != std::errc() || ptr != end || n < lo || n > hi)
    bad(name, *v, "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return n;
}

size_t choice(const char* name, std::initializer_list<const char*> choices, size_t fallback) {
  std::optional<std::string> v = get(name);
  if (!v) return fallback;
  size_t i = 0;
  for (const char* c : choices) {
    if (*v == c) return i;
    ++i;
  }
  std::string list;
  i = 0;
  for (const char* c : choices) {
    list += i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ";
    list += "'" + std::string(c) + "'";
    ++i;
  }
  bad(name, *v, list);
}

}  // namespace kiln::env
