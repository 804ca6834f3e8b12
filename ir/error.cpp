// kiln::Error, source locations and interned strings.
#include "ir/error.h"

#include <mutex>
#include <unordered_set>

namespace kiln {

std::string SourceLoc::str() const {
  if (!known()) return "<unknown>";
  std::string_view f(file ? file : "");
  size_t slash = f.find_last_of("/\\");
  if (slash != std::string_view::npos) f.remove_prefix(slash + 1);
  return std::string(f) + ":" + std::to_string(line);
}

const char* intern_string(std::string_view s) {
  static std::mutex mu;
  // Node-based, so c_str() stays valid; never destroyed: a background compile may
  // still run during exit.
  static auto* strings = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return strings->emplace(s).first->c_str();
}

Error::Error(std::string message, SourceLoc where)
    : std::runtime_error(message), message_(std::move(message)), full_(message_), where_(where) {
  if (where_.known()) full_ += "\n  at " + where_.str();
}

void Error::attach(SourceLoc where, std::string_view op_name) {
  std::string suffix = full_.substr(message_.size());
  if (!op_name.empty() && !named_) {
    named_ = true;
    std::string prefix = std::string(op_name) + ":";
    if (!message_.starts_with(prefix)) message_ = prefix + " " + message_;
  }
  if (!where_.known() && where.known()) {
    where_ = where;
    suffix = "\n  recorded at " + where_.str();
  }
  full_ = message_ + suffix;
}

namespace detail {
void fail_str(std::string msg) {
  throw Error(std::move(msg));
}
}  // namespace detail

}  // namespace kiln
