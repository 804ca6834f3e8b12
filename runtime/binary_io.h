// Byte-level helpers shared by Kiln's file formats (frontend/serialize.h,
// frontend/checkpoint.h, frontend/npy.h, the kernel cache in
// runtime/object_cache.h): the one checked whole-file reader every file read in
// Kiln goes through, durable atomic writes (temporary file, fsync, rename),
// little-endian encoding, a 64-bit checksum, and the checksummed frame and
// tensor records that the graph and weights formats share.
// Internal: not part of <kiln/kiln.h>.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace kiln::io {

/// An open regular file, read in parts: a reader checks a format's header
/// against the file's size before it reads the rest, or asks memory for it.
/// Only regular files open: a directory, a device (/dev/zero), a FIFO or a
/// socket is a kiln::Error ("<path>: is a character device (expected a regular
/// file)"). Every failure is a kiln::Error naming the file, memory included
/// (never std::bad_alloc).
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  /// The size when the file was opened.
  uint64_t size() const { return size_; }
  /// The bytes [offset, offset + n), cut at size(). The memory is checked first
  /// ("out of CPU memory: reading <path> needs N bytes, ...").
  std::string read(uint64_t offset, uint64_t n) const;
  /// Exactly the n bytes at `offset` into dst; a file that ends before them (it
  /// shrank since it was opened) is an error.
  void read_into(uint64_t offset, void* dst, uint64_t n) const;

 private:
  friend std::string read_file(const std::string& path);
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// The whole file as bytes, for formats without a header to check first (text,
/// CSV). The rules of InputFile apply.
std::string read_file(const std::string& path);

/// Writes `bytes` to `path` so that a reader sees either the old file or the
/// complete new one: a temporary file in the same directory (`<path>.tmp.<pid>.<n>`),
/// fsync, rename, fsync of the directory. Creates missing parent directories.
/// Only a regular file is replaced (keeping its permission bits), or a new one
/// made: a directory, a device (/dev/null), a FIFO or a socket at `path` is a
/// kiln::Error ("<path>: is a character device; only a regular file is replaced
/// ..."). A symbolic link to a regular file stays a link: the file it names is
/// replaced. The first write into a directory (and one every ten minutes after)
/// removes the temporary files that killed writes left there: those of a process
/// that is gone, untouched for ten minutes.
void write_file_durable(const std::string& path, std::string_view bytes);

/// Throws the error write_file_durable would for what is at `path` (anything but
/// a regular file or a link to one), so a caller refuses before it computes.
void check_write_target(const std::string& path);

/// A 64-bit checksum (FNV-1a's xor-multiply step over 64-bit words in four
/// interleaved lanes, each step followed by an xor-shift, then a final mix).
/// Every single-word change changes the result.
uint64_t checksum64(const void* data, size_t n);

/// Appends little-endian integers and raw bytes to a string.
class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void bytes(std::string_view b) { out_.append(b); }
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  /// Overwrites 8 bytes at `pos` (a length written before its payload was known).
  void patch_u64(size_t pos, uint64_t v);
  size_t size() const { return out_.size(); }
  std::string& str() { return out_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

/// Reads a little-endian unsigned integer of `n` bytes at p (no bounds check).
inline uint64_t load_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

/// Bounds-checked little-endian reads of the bytes [0, end) of one file; every
/// error names the file and `where` (the part being read) and is a kiln::Error.
class ByteReader {
 public:
  ByteReader(const std::string& path, std::string_view data, size_t end)
      : path_(path), data_(data), end_(end) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }
  /// The part being read, for errors ("the header", "parameter 3 ('w')").
  std::string where = "the header";

  /// The next n bytes; "<path>: truncated at byte <end> in <where> (...)" when
  /// fewer remain.
  std::string_view bytes(uint64_t n, const char* what);
  /// The next n-byte little-endian unsigned integer.
  uint64_t u(int n, const char* what) { return load_le(bytes(n, what).data(), n); }
  /// Throws "<path>: malformed <where> at byte <at>: <what>".
  [[noreturn]] void malformed(const std::string& what, size_t at) const;
  /// Throws "<path>: <what>".
  [[noreturn]] void fail(const std::string& what) const;

 private:
  const std::string& path_;
  std::string_view data_;
  size_t end_;
  size_t pos_ = 0;
};

/// `s` in single quotes, bytes outside printable ASCII as \xNN (names read from
/// files, in errors).
std::string quote_name(std::string_view s);

/// Kiln's checksummed file frame (frontend/serialize.h, frontend/checkpoint.h),
/// all integers little-endian:
///   magic, u32 version, u64 file size (every byte, checksum included), u32 count,
///   the body, u64 checksum64 of every byte before it.
struct FrameFormat {
  std::string_view magic;  // "KILN-GRAPH\n"
  uint32_t version;        // the one version this build writes and reads
  const char* kind;        // "Kiln graph file", in errors
  const char* count_name;  // "section count", in errors
};

/// Writes the frame's header; the file size is filled in by end_frame.
void begin_frame(ByteWriter& w, const FrameFormat& f, uint32_t count);
/// Fills in the file size and appends the checksum; `w` then holds the whole file.
void end_frame(ByteWriter& w, const FrameFormat& f);

/// The header of a checked frame, and a reader over its body (positioned after
/// the header, ending before the checksum).
struct Frame {
  uint32_t count;
  ByteReader body;
};

/// The bytes of a framed file, read only after its header passed the checks
/// that need no more than the header: the magic, the version and the size it
/// declares against the file's (a file longer than it says is an error before
/// the rest is read). open_frame checks the rest.
std::string read_frame_file(const std::string& path, const FrameFormat& f);

/// Checks the frame of `data`, the bytes of the file `path`: the magic (a
/// foreign file is "not a <kind>", naming what it is when Kiln knows), the
/// version, the size and the checksum. When the file is shorter than its header
/// says, `locate_truncation` (if given) is called with a reader over all the
/// bytes after the header and the count, to throw a more precise "truncated at
/// byte N in ..." error by walking the body as far as it goes.
Frame open_frame(const std::string& path, std::string_view data, const FrameFormat& f,
                 const std::function<void(ByteReader&, uint32_t count)>& locate_truncation = {});

/// One named tensor as the graph and weights formats store it: u32 name length,
/// name, u8 dtype (1 f32, 2 f64, 3 i32, 4 i64, 5 bool, 6 u8, 7 i8, 8 i16), u32 rank, i64
/// dims[rank], u64 data length, the elements' raw little-endian bytes, row-major.
struct TensorRecord {
  std::string name;
  DType dtype{};
  Shape shape;
  std::string_view data;  // into the file's bytes
};

/// Appends a record; `data` holds the dense elements of dtype and shape.
void write_tensor_record(ByteWriter& w, std::string_view name, DType dtype, const Shape& shape,
                         const void* data);
/// Reads a record, checking the dtype code, the rank (at most 64), every size
/// (>= 0), the data length against dtype and shape, and that bool elements are
/// 0 or 1; appends the quoted name (when not empty) to r.where.
TensorRecord read_tensor_record(ByteReader& r);

}  // namespace kiln::io
