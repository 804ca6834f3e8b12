// Byte-level helpers shared by Kiln's file formats (frontend/serialize.h,
// frontend/npy.h, the kernel cache in runtime/object_cache.h): the one checked
// whole-file reader every file read in Kiln goes through, durable atomic writes
// (temporary file, fsync, rename), little-endian encoding and a 64-bit checksum.
// Internal: not part of <kiln/kiln.h>.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::io {

/// The whole file as bytes. Only regular files are read: a directory, a device
/// (/dev/zero), a FIFO or a socket is a kiln::Error ("<path>: is a character device
/// (expected a regular file)"), as is a file that cannot be opened or read.
std::string read_file(const std::string& path);

/// Writes `bytes` to `path` so that a reader sees either the old file or the
/// complete new one: a temporary file in the same directory, fsync, rename,
/// fsync of the directory. Creates missing parent directories.
void write_file_durable(const std::string& path, std::string_view bytes);

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

}  // namespace kiln::io
