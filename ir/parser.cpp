// Parser for the canonical IR text (see printer.h). Line oriented: one node,
// `return` or `update` per line; `//` starts a comment. Value names are any
// %word; they are renumbered densely. Types may be left out for ops whose type
// the op table infers; given types are checked against the table's rules.
#include "ir/parser.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/verifier.h"

namespace kiln {

namespace {

enum class Tok { Name, Ident, Int, Float, String, Punct, Newline, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier, value name (without %), number text, unescaped string, punct
  int line = 1, col = 1;
};

bool is_ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view source, bool require_return)
      : src_(text), source_(source), require_return_(require_return) {}

  Graph parse() {
    for (next(); tok_.kind != Tok::End;) {
      if (tok_.kind == Tok::Newline) {
        next();
        continue;
      }
      if (tok_.kind == Tok::Ident && tok_.text == "return")
        parse_return();
      else if (tok_.kind == Tok::Ident && tok_.text == "update")
        parse_update();
      else
        parse_node();
      end_of_line();
    }
    if (require_return_ && !seen_return_)
      fail_at(tok_, "expected a 'return' line naming the graph's outputs, got none");
    try {
      verify(g_);
    } catch (const Error& e) {
      throw Error(std::string(source_) + ": invalid graph: " + e.what());
    }
    return std::move(g_);
  }

 private:
  // ---- Errors ----

  [[noreturn]] void fail_at(const Token& t, const std::string& msg) const {
    throw Error(std::string(source_) + ":" + std::to_string(t.line) + ":" + std::to_string(t.col) +
                ": " + msg);
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Newline:
        return "end of line";
      case Tok::End:
        return "end of input";
      case Tok::Name:
        return "'%" + t.text + "'";
      case Tok::String:
        return "a string";
      default:
        return "'" + t.text + "'";
    }
  }
  [[noreturn]] void expected(const std::string& what) const {
    fail_at(tok_, "expected " + what + ", got " + describe(tok_));
  }

  // ---- Lexer ----

  char peek_char(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  void advance_char() {
    if (src_[pos_++] == '\n') {
      ++line_;
      line_start_ = pos_;
    }
  }
  void skip_blanks() {
    for (;;) {
      char c = peek_char();
      if (c == ' ' || c == '\t' || c == '\r') {
        advance_char();
      } else if (c == '/' && peek_char(1) == '/') {
        while (pos_ < src_.size() && peek_char() != '\n') advance_char();
      } else {
        return;
      }
    }
  }

  void next() {
    skip_blanks();
    tok_ = Token{};
    tok_.line = line_;
    tok_.col = static_cast<int>(pos_ - line_start_) + 1;
    if (pos_ >= src_.size()) return;
    char c = peek_char();
    size_t start = pos_;
    if (c == '\n') {
      advance_char();
      tok_.kind = Tok::Newline;
    } else if (c == '%') {
      advance_char();
      while (is_ident_char(peek_char()) || peek_char() == '.') advance_char();
      tok_.kind = Tok::Name;
      tok_.text = std::string(src_.substr(start + 1, pos_ - start - 1));
      if (tok_.text.empty()) fail_at(tok_, "expected a value name after '%'");
    } else if (is_ident_start(c)) {
      while (is_ident_char(peek_char())) advance_char();
      tok_.kind = Tok::Ident;
      tok_.text = std::string(src_.substr(start, pos_ - start));
    } else if (is_digit(c) || (c == '-' && (is_digit(peek_char(1)) || peek_char(1) == 'n' ||
                                            peek_char(1) == 'i'))) {
      lex_number();
    } else if (c == '"') {
      lex_string();
    } else {
      advance_char();
      tok_.kind = Tok::Punct;
      tok_.text = std::string(1, c);
    }
  }

  void lex_number() {
    size_t start = pos_;
    if (peek_char() == '-') advance_char();
    bool is_float = false;
    if (std::isalpha(static_cast<unsigned char>(peek_char()))) {  // nan, inf
      while (std::isalpha(static_cast<unsigned char>(peek_char()))) advance_char();
      is_float = true;
    } else {
      while (is_digit(peek_char()) || peek_char() == '.') {
        is_float |= peek_char() == '.';
        advance_char();
      }
      if (peek_char() == 'e' || peek_char() == 'E') {
        is_float = true;
        advance_char();
        if (peek_char() == '+' || peek_char() == '-') advance_char();
        while (is_digit(peek_char())) advance_char();
      }
    }
    tok_.kind = is_float ? Tok::Float : Tok::Int;
    tok_.text = std::string(src_.substr(start, pos_ - start));
  }

  void lex_string() {
    advance_char();  // opening quote
    std::string s;
    for (;;) {
      char c = peek_char();
      if (pos_ >= src_.size() || c == '\n') fail_at(tok_, "expected a closing '\"' for the string");
      advance_char();
      if (c == '"') break;
      if (c != '\\') {
        s += c;
        continue;
      }
      char e = peek_char();
      advance_char();
      if (e == 'n') {
        s += '\n';
      } else if (e == 't') {
        s += '\t';
      } else if (e == '"' || e == '\\') {
        s += e;
      } else if (e == 'x') {
        int v = 0;
        for (int i = 0; i < 2; ++i) {
          char h = peek_char();
          int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : -1;
          if (d < 0) fail_at(tok_, "expected two hex digits after \\x in the string");
          v = v * 16 + d;
          advance_char();
        }
        s += static_cast<char>(v);
      } else {
        fail_at(tok_, std::string("unknown escape \\") + e + " in the string");
      }
    }
    tok_.kind = Tok::String;
    tok_.text = std::move(s);
  }

  // ---- Token helpers ----

  bool at_punct(char c) const { return tok_.kind == Tok::Punct && tok_.text[0] == c; }
  void expect_punct(char c) {
    if (!at_punct(c)) expected(std::string("'") + c + "'");
    next();
  }
  void end_of_line() {
    if (tok_.kind != Tok::Newline && tok_.kind != Tok::End) expected("end of line");
  }

  int64_t parse_int(const char* what) {
    if (tok_.kind != Tok::Int) expected(what);
    int64_t v = 0;
    auto res = std::from_chars(tok_.text.data(), tok_.text.data() + tok_.text.size(), v);
    if (res.ec != std::errc() || res.ptr != tok_.text.data() + tok_.text.size())
      fail_at(tok_, "integer " + tok_.text + " is out of range");
    next();
    return v;
  }

  double float_value(const Token& t) const {
    std::string_view s = t.text;
    bool neg = s.starts_with('-');
    if (s.substr(neg) == "nan") {
      double nan = std::numeric_limits<double>::quiet_NaN();
      return neg ? -nan : nan;
    }
    double v = 0;
    auto res = std::from_chars(s.data(), s.data() + s.size(), v);
    if (res.ec != std::errc() || res.ptr != s.data() + s.size())
      fail_at(t, "expected a number, got '" + t.text + "'");
    return v;
  }

  Value parse_use() {
    if (tok_.kind != Tok::Name) expected("a value such as %0");
    auto it = values_.find(tok_.text);
    if (it == values_.end()) fail_at(tok_, "value %" + tok_.text + " is not defined before use");
    next();
    return it->second;
  }

  // ---- Lines ----

  void parse_return() {
    if (seen_return_) fail_at(tok_, "expected one 'return' line, got a second");
    seen_return_ = true;
    next();
    if (tok_.kind == Tok::Newline || tok_.kind == Tok::End) return;
    g_.outputs.push_back(parse_use());
    while (at_punct(',')) {
      next();
      g_.outputs.push_back(parse_use());
    }
  }

  void parse_update() {
    next();
    int64_t param = parse_int("a parameter index");
    expect_punct('=');
    g_.updates.push_back({param, parse_use()});
  }

  void parse_node() {
    std::vector<Token> names;
    if (tok_.kind == Tok::Name) {
      names.push_back(tok_);
      next();
      while (at_punct(',')) {
        next();
        if (tok_.kind != Tok::Name) expected("a result name such as %0");
        names.push_back(tok_);
        next();
      }
      expect_punct('=');
    }
    if (tok_.kind != Tok::Ident) expected("an op name");
    Token op_tok = tok_;
    Node n;
    if (!parse_op_name(tok_.text, &n.op))
      fail_at(tok_, "expected an op name, got '" + tok_.text + "'");
    next();
    if (tok_.kind == Tok::Name) {
      n.operands.push_back(parse_use());
      while (at_punct(',')) {
        next();
        n.operands.push_back(parse_use());
      }
    }
    if (at_punct('{')) n.attrs = parse_attrs();
    if (at_punct(':')) {
      next();
      n.results.push_back(parse_type());
      while (at_punct(',')) {
        next();
        n.results.push_back(parse_type());
      }
    }
    if (at_punct('@')) n.loc = parse_loc();
    if (tok_.kind != Tok::Newline && tok_.kind != Tok::End)
      expected(n.results.empty() ? "':' and the result types, or end of line" : "end of line");
    check_node(op_tok, names, n);
    NodeId id = g_.add(std::move(n));
    for (uint32_t r = 0; r < names.size(); ++r) {
      if (!values_.emplace(names[r].text, Value(id, r)).second)
        fail_at(names[r], "value %" + names[r].text + " is defined twice");
    }
  }

  // Arity, result count and the type against the op table's rules.
  void check_node(const Token& op_tok, const std::vector<Token>& names, Node& n) {
    const OpInfo& info = op_info(n.op);
    if (info.arity >= 0 && static_cast<size_t>(info.arity) != n.operands.size())
      fail_at(op_tok, std::string(info.name) + ": expected " + std::to_string(info.arity) +
                          " operands, got " + std::to_string(n.operands.size()));
    OpCategory c = info.category;
    bool given = c == OpCategory::Input || c == OpCategory::Creation || c == OpCategory::Custom;
    if (given) {
      if (n.results.empty() && !names.empty())
        fail_at(op_tok, std::string(info.name) +
                            ": expected ':' and the result type (the type of " + category_name(c) +
                            " ops is given, not inferred)");
      if (n.results.size() != names.size())
        fail_at(op_tok, "expected " + std::to_string(names.size()) +
                            " result types after ':' (one per result name), got " +
                            std::to_string(n.results.size()));
      return;
    }
    if (names.size() != 1)
      fail_at(op_tok, std::string(info.name) + ": expected 1 result name, got " +
                          std::to_string(names.size()));
    if (n.results.size() > 1)
      fail_at(op_tok, std::string(info.name) + ": expected 1 result type, got " +
                          std::to_string(n.results.size()));
    std::vector<TensorType> in;
    for (Value v : n.operands) in.push_back(g_.type(v));
    TensorType t;
    try {
      t = infer_type(n.op, in, n.attrs);
    } catch (const Error& e) {
      fail_at(op_tok, e.message());
    }
    if (n.results.empty())
      n.results.push_back(t);
    else if (n.results[0] != t)
      fail_at(op_tok, std::string(info.name) + ": expected result type " + t.str() +
                          " (from the op's rules), got " + n.results[0].str());
  }

  Attrs parse_attrs() {
    Attrs a;
    next();  // '{'
    if (at_punct('}')) {
      next();
      return a;
    }
    for (;;) {
      if (tok_.kind != Tok::Ident) expected("an attribute name");
      AttrKey k;
      if (!parse_attr_key(tok_.text, &k)) expected("an attribute name");
      if (a.has(k)) fail_at(tok_, "attribute '" + tok_.text + "' is given twice");
      next();
      expect_punct('=');
      a.set(k, parse_attr_value());
      if (at_punct('}')) break;
      if (!at_punct(',')) expected("',' or '}'");
      next();
    }
    next();
    return a;
  }

  AttrValue parse_attr_value() {
    if (tok_.kind == Tok::Int) return parse_int("an integer");
    if (tok_.kind == Tok::Float ||
        (tok_.kind == Tok::Ident && (tok_.text == "nan" || tok_.text == "inf"))) {
      double v = float_value(tok_);
      next();
      return v;
    }
    if (tok_.kind == Tok::String) {
      std::string s = tok_.text;
      next();
      return s;
    }
    if (tok_.kind == Tok::Ident) {
      std::optional<DType> t = parse_dtype(tok_.text);
      if (!t) expected("an attribute value (number, string, dtype or list)");
      next();
      return *t;
    }
    if (!at_punct('[')) expected("an attribute value (number, string, dtype or list)");
    next();
    std::vector<Token> items;
    bool any_float = false;
    while (!at_punct(']')) {
      if (!items.empty()) expect_punct(',');
      bool named_float = tok_.kind == Tok::Ident && (tok_.text == "nan" || tok_.text == "inf");
      if (tok_.kind != Tok::Int && tok_.kind != Tok::Float && !named_float)
        expected("a number or ']'");
      any_float |= tok_.kind != Tok::Int;
      items.push_back(tok_);
      next();
    }
    next();
    if (any_float) {
      std::vector<double> v;
      for (const Token& t : items)
        v.push_back(t.kind == Tok::Int ? std::stod(t.text) : float_value(t));
      return v;
    }
    std::vector<int64_t> v;
    for (const Token& t : items) {
      int64_t x = 0;
      auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), x);
      if (res.ec != std::errc()) fail_at(t, "integer " + t.text + " is out of range");
      v.push_back(x);
    }
    return v;
  }

  // "f32[64,100]", "cuda:f32[3]" (device 0) or "cuda:1:f32[3]".
  TensorType parse_type() {
    TensorType t;
    const Token start = tok_;
    if (tok_.kind == Tok::Ident && tok_.text == "cuda") {
      next();
      expect_punct(':');
      int index = 0;
      if (tok_.kind == Tok::Int) {
        index = static_cast<int>(parse_int("a device index"));
        expect_punct(':');
      }
      t.device = Device(DeviceType::CUDA, index);
    }
    std::optional<DType> dt = tok_.kind == Tok::Ident ? parse_dtype(tok_.text) : std::nullopt;
    if (!dt) expected("a type such as f32[64,100]");
    t.dtype = *dt;
    next();
    expect_punct('[');
    while (!at_punct(']')) {
      if (!t.shape.empty()) expect_punct(',');
      int64_t d = parse_int("a dimension size");
      if (d < 0) fail_at(tok_, "expected a dimension size >= 0, got " + std::to_string(d));
      t.shape.push_back(d);
    }
    next();
    // A type a buffer can have: its element count, byte size and strides fit
    // in 64 bits (f32[2^62,4] is refused here, not when it compiles).
    try {
      (void)t.bytes();
      (void)contiguous_strides(t.shape);
    } catch (const Error& e) {
      fail_at(start, "type " + t.str() + ": " + e.message());
    }
    return t;
  }

  // "@ file.cpp:12": the word after '@' up to the end of the line, split at its last ':'.
  SourceLoc parse_loc() {
    Token at = tok_;
    skip_blanks();
    size_t start = pos_;
    while (pos_ < src_.size() && peek_char() != '\n' && peek_char() != ' ' && peek_char() != '\t' &&
           peek_char() != '\r')
      advance_char();
    std::string_view word = src_.substr(start, pos_ - start);
    size_t colon = word.rfind(':');
    uint32_t line = 0;
    std::string_view digits = colon == std::string_view::npos ? "" : word.substr(colon + 1);
    auto res = std::from_chars(digits.data(), digits.data() + digits.size(), line);
    if (digits.empty() || res.ec != std::errc() || res.ptr != digits.data() + digits.size() ||
        line == 0)
      fail_at(at, "expected a location such as 'file.cpp:12' after '@', got '" + std::string(word) +
                      "'");
    next();
    return SourceLoc(intern_string(word.substr(0, colon)), line);
  }

  std::string_view src_;
  std::string_view source_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  Token tok_;
  Graph g_;
  std::unordered_map<std::string, Value> values_;
  bool seen_return_ = false;
  bool require_return_ = false;
};

}  // namespace

Graph parse_graph(std::string_view text, std::string_view source_name, bool require_return) {
  return Parser(text, source_name, require_return).parse();
}

}  // namespace kiln
