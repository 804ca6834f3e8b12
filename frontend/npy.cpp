// NumPy .npy reading and writing (see npy.h). The header is a Python dict
// literal; this reads the subset NumPy writes: string, bool and int-tuple values.
#include "frontend/npy.h"

#include <cstring>
#include <optional>

#include "frontend/autograd.h"
#include "frontend/tensor_impl.h"
#include "runtime/allocator.h"
#include "runtime/binary_io.h"

namespace kiln {
namespace {

constexpr std::string_view kNpyMagic = "\x93NUMPY";
constexpr const char* kSupported = "<f4 <f8 |u1 |i1 <i2 <i4 <i8 |b1";

const char* npy_descr(DType t) {
  switch (t) {
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::i32:
      return "<i4";
    case DType::i64:
      return "<i8";
    case DType::b8:
      return "|b1";
    case DType::u8:
      return "|u1";
    case DType::i8:
      return "|i1";
    case DType::i16:
      return "<i2";
  }
  return "?";
}

// The header dictionary: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct NpyHeader {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<Shape> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  NpyHeader parse() {
    NpyHeader h;
    ws();
    expect('{', "'{' to open the header dictionary");
    for (;;) {
      ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      std::string key = string_literal("a quoted key");
      ws();
      expect(':', "':' after key '" + key + "'");
      ws();
      if (key == "descr") {
        if (h.descr) fail("duplicate key 'descr'");
        if (peek() == '[') fail("structured dtypes (a list in 'descr') are not supported");
        h.descr = string_literal("a quoted dtype string for 'descr'");
      } else if (key == "fortran_order") {
        if (h.fortran_order) fail("duplicate key 'fortran_order'");
        h.fortran_order = boolean();
      } else if (key == "shape") {
        if (h.shape) fail("duplicate key 'shape'");
        h.shape = tuple();
      } else {
        fail("unexpected key '" + key + "' (expected 'descr', 'fortran_order' and 'shape')");
      }
      ws();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != '}') {
        fail("expected ',' or '}' after the value of '" + key + "', got " + got());
      }
    }
    ws();
    if (i_ != s_.size()) fail("unexpected text after the dictionary: " + got());
    if (!h.descr) fail("the header has no 'descr' key");
    if (!h.fortran_order) fail("the header has no 'fortran_order' key");
    if (!h.shape) fail("the header has no 'shape' key");
    return h;
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  std::string got() const {
    if (i_ >= s_.size()) return "the end of the header";
    auto c = static_cast<unsigned char>(s_[i_]);
    if (c < 0x20 || c >= 0x7f) return "byte " + std::to_string(c);
    std::string out = "'";
    out += s_[i_];
    out += '\'';
    return out;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(name_ + ": malformed .npy header at column " + std::to_string(i_ + 1) + ": " +
                what);
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  void expect(char c, const std::string& what) {
    if (peek() != c) fail("expected " + what + ", got " + got());
    ++i_;
  }
  std::string string_literal(const std::string& what) {
    char q = peek();
    if (q != '\'' && q != '"') fail("expected " + what + ", got " + got());
    size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\' || s_[i_] == '\n') fail("unsupported character in a string");
      ++i_;
    }
    if (i_ >= s_.size()) fail("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean() {
    for (bool v : {true, false}) {
      std::string_view word = v ? "True" : "False";
      if (s_.substr(i_).starts_with(word)) {
        i_ += word.size();
        return v;
      }
    }
    fail("expected True or False for 'fortran_order', got " + got());
  }
  Shape tuple() {
    expect('(', "a tuple for 'shape'");
    Shape out;
    for (;;) {
      ws();
      if (peek() == ')') {
        ++i_;
        return out;
      }
      if (peek() < '0' || peek() > '9')
        fail("expected a dimension (a non-negative integer), got " + got());
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (int64_t(1) << 58)) fail("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (peek() == 'L') ++i_;  // Python 2's long literals
      out.push_back(v);
      if (out.size() > 64) fail("more than 64 dimensions");
      ws();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in 'shape', got " + got());
      }
    }
  }

  std::string_view s_;
  const std::string& name_;
  size_t i_ = 0;
};

DType dtype_from_descr(const std::string& d, const std::string& name) {
  if (d.size() == 3) {
    char order = d[0];
    std::string kind = d.substr(1);
    std::optional<DType> t;
    if (kind == "f4") t = DType::f32;
    if (kind == "f8") t = DType::f64;
    if (kind == "i4") t = DType::i32;
    if (kind == "i8") t = DType::i64;
    if (kind == "b1") t = DType::b8;
    if (kind == "u1") t = DType::u8;
    if (kind == "i1") t = DType::i8;
    if (kind == "i2") t = DType::i16;
    // One byte per element: no byte order.
    const bool single = kind == "b1" || kind == "u1" || kind == "i1";
    if (t && single && (order == '|' || order == '<' || order == '>' || order == '=')) return *t;
    if (t && (order == '<' || order == '=')) return *t;
    if (t && order == '>')
      throw Error(name + ": big-endian data ('" + d +
                  "') is not supported (expected little-endian '<" + kind +
                  "'; convert with a.astype('<" + kind + "'))");
  }
  throw Error(name + ": dtype '" + d + "' is not supported (expected one of " + kSupported + ")");
}

}  // namespace

namespace {

// NumPy's own reader refuses headers past 10000 bytes; Kiln writes about 128.
constexpr uint64_t kMaxHeaderBytes = uint64_t(1) << 20;

// Where the data starts, from the first 12 bytes (or fewer) of a file of `size`
// bytes: the magic, the version and the header length, checked against the size.
uint64_t npy_data_offset(std::string_view head, uint64_t size, const std::string& name) {
  if (!head.starts_with(kNpyMagic))
    throw Error(name + ": not a NumPy .npy file (expected it to start with \"\\x93NUMPY\")");
  if (head.size() < 8)
    throw Error(name + ": truncated in the header (" + std::to_string(size) + " bytes)");
  int major = static_cast<unsigned char>(head[6]), minor = static_cast<unsigned char>(head[7]);
  if (major < 1 || major > 3 || minor != 0)
    throw Error(name + ": .npy format version " + std::to_string(major) + "." +
                std::to_string(minor) + " is not supported (expected 1.0, 2.0 or 3.0)");
  size_t len_bytes = major == 1 ? 2 : 4;
  if (head.size() < 8 + len_bytes)
    throw Error(name + ": truncated in the header (" + std::to_string(size) + " bytes)");
  uint64_t header_len = io::load_le(head.data() + 8, static_cast<int>(len_bytes));
  if (header_len > size - 8 - len_bytes)
    throw Error(name + ": truncated: the header says it is " + std::to_string(header_len) +
                " bytes long, the file has " + std::to_string(size - 8 - len_bytes) +
                " after the length field");
  if (header_len > kMaxHeaderBytes)
    throw Error(name + ": damaged: the header says it is " + std::to_string(header_len) +
                " bytes long (expected at most " + std::to_string(kMaxHeaderBytes) +
                "; NumPy writes about 128)");
  return 8 + len_bytes + header_len;
}

struct NpyLayout {
  DType dtype;
  Shape shape;
  uint64_t data_at;
  uint64_t data_bytes;
};

// The header (`head`: the bytes up to the data) of a file of `size` bytes,
// checked: the dictionary, the dtype, and the data's length against the size.
NpyLayout npy_layout(std::string_view head, uint64_t size, const std::string& name) {
  const uint64_t data_at = npy_data_offset(head, size, name);
  const size_t len_bytes = head[6] == 1 ? 2 : 4;
  NpyHeader h = HeaderParser(head.substr(8 + len_bytes, data_at - 8 - len_bytes), name).parse();
  DType dt = dtype_from_descr(*h.descr, name);
  const Shape& shape = *h.shape;
  if (*h.fortran_order && shape.size() >= 2)
    throw Error(
        name +
        ": fortran_order=True (column-major) arrays are not supported (expected C order; save "
        "np.ascontiguousarray(a) instead)");
  uint64_t want = 0;
  try {
    want = static_cast<uint64_t>(byte_size(shape, dtype_size(dt)));
  } catch (const Error& e) {
    throw Error(name + ": " + e.message());
  }
  uint64_t have = size - data_at;
  if (have != want)
    throw Error(name + ": " +
                (have < want ? "truncated: expected " : "damaged: expected exactly ") +
                std::to_string(want) + " bytes of data for " + *h.descr + shape_str(shape) +
                " after byte " + std::to_string(data_at) + ", found " + std::to_string(have));
  return {dt, shape, data_at, want};
}

// A tensor for the layout's data, which `fill` writes (its raw bytes).
template <class Fill>
Tensor npy_tensor(const NpyLayout& l, const std::string& name, Fill&& fill) {
  check_host_bytes(static_cast<size_t>(l.data_bytes), "the data of " + name);
  NoGradGuard no_grad;
  Tensor t = empty(l.shape, TensorOptions(l.dtype));
  auto* out = static_cast<char*>(t.impl()->view().data);
  if (l.data_bytes) fill(out);
  if (l.dtype == DType::b8)
    for (uint64_t k = 0; k < l.data_bytes; ++k) out[k] = out[k] != 0;
  return t;
}

}  // namespace

Tensor parse_npy(std::string_view bytes, const std::string& name) {
  const NpyLayout l = npy_layout(bytes, bytes.size(), name);
  return npy_tensor(l, name,
                    [&](char* out) { std::memcpy(out, bytes.data() + l.data_at, l.data_bytes); });
}

std::string npy_bytes(const Tensor& t, Loc l) {
  const SourceLoc loc = SourceLoc::from(l);
  if (!t.defined()) throw Error("write_npy: the tensor is undefined", loc);
  if (t.is_symbolic())
    throw Error("write_npy: the tensor is symbolic (inside a trace it holds no data)", loc);
  NoGradGuard no_grad;
  Tensor d = t.detach().cpu().contiguous();
  std::string shape = "(";
  for (size_t i = 0; i < d.sizes().size(); ++i)
    shape += (i ? ", " : "") + std::to_string(d.sizes()[i]);
  shape += d.sizes().size() == 1 ? ",)" : ")";
  std::string dict = std::string("{'descr': '") + npy_descr(d.dtype()) +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  int major = dict.size() + 1 + 10 > 65535 ? 2 : 1;
  size_t prefix = major == 1 ? 10 : 12;
  // As NumPy pads: to a multiple of 64, a whole 64 when already aligned.
  size_t pad = 64 - (prefix + dict.size() + 1) % 64;
  std::string header = dict + std::string(pad, ' ') + "\n";
  io::ByteWriter w;
  w.bytes(kNpyMagic);
  w.u8(static_cast<uint8_t>(major));
  w.u8(0);
  if (major == 1)
    w.u16(static_cast<uint16_t>(header.size()));
  else
    w.u32(static_cast<uint32_t>(header.size()));
  w.bytes(header);
  size_t n = static_cast<size_t>(d.numel()) * dtype_size(d.dtype());
  if (n) w.bytes(d.impl()->view().data, n);
  return std::move(w.str());
}

// The header first, checked against the file's size; then the data straight
// into the tensor (a file is never held in memory beside it).
Tensor read_npy(const std::string& path) {
  io::InputFile f(path);
  const uint64_t data_at = npy_data_offset(f.read(0, 12), f.size(), path);
  const NpyLayout l = npy_layout(f.read(0, data_at), f.size(), path);
  return npy_tensor(l, path, [&](char* out) { f.read_into(l.data_at, out, l.data_bytes); });
}

void write_npy(const std::string& path, const Tensor& t, Loc l) {
  io::write_file_durable(path, npy_bytes(t, l));
}

}  // namespace kiln
