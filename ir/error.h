// kiln::Error and source locations. Every user-facing failure is a kiln::Error
// whose message says what was expected, what came, and which line of user code
// recorded the operation (DESIGN.md, STYLE.md rule 12).
#pragma once

#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kiln {

/// Where in user code an op was recorded. Strings point at static storage
/// (std::source_location's, or interned by the IR parser).
struct SourceLoc {
  const char* file = "";
  const char* function = "";
  uint32_t line = 0;

  SourceLoc() = default;
  SourceLoc(const char* file, uint32_t line, const char* function = "")
      : file(file), function(function), line(line) {}
  static SourceLoc from(const std::source_location& l) {
    return SourceLoc(l.file_name(), l.line(), l.function_name());
  }
  bool known() const { return line != 0; }
  /// "file.cpp:12" with the directory stripped, or "<unknown>".
  std::string str() const;
  friend bool operator==(const SourceLoc& a, const SourceLoc& b) {
    return a.line == b.line && std::string_view(a.file) == b.file;
  }
};

/// Interns a string for the lifetime of the process (used for parsed locations).
const char* intern_string(std::string_view s);

/// The one exception type Kiln throws at users.
class Error : public std::runtime_error {
 public:
  explicit Error(std::string message)
      : std::runtime_error(message), message_(message), full_(std::move(message)) {}
  /// what() is "<message>\n  at file.cpp:12" when the location is known.
  Error(std::string message, SourceLoc where);
  /// The message with the location suffix, if any.
  const char* what() const noexcept override { return full_.c_str(); }
  /// The message without the location suffix.
  const std::string& message() const { return message_; }
  const SourceLoc& where() const { return where_; }
  /// Attaches a location (and an op name) if none is attached yet; rethrow after.
  /// The message gets an "add: " prefix (unless it already starts with it) and
  /// what() gets "\n  recorded at mlp.cpp:12" when `where` is known.
  void attach(SourceLoc where, std::string_view op_name = {});

 private:
  std::string message_;
  std::string full_;  // message_ plus the location line
  SourceLoc where_;
  bool named_ = false;  // an op name prefix was attached
};

/// Throws kiln::Error built from the pieces (streamed together) when cond is false.
#define KILN_CHECK(cond, ...)                       \
  do {                                              \
    if (!(cond)) ::kiln::detail::fail(__VA_ARGS__); \
  } while (0)

namespace detail {
[[noreturn]] void fail_str(std::string msg);
template <class... Args>
[[noreturn]] void fail(Args&&... args);
}  // namespace detail

}  // namespace kiln

#include <sstream>
namespace kiln::detail {
template <class... Args>
[[noreturn]] void fail(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  fail_str(os.str());
}
}  // namespace kiln::detail
