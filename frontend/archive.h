// Archives: named tensors, numbers, strings and nested archives in one file
// (libtorch's torch::serialize::OutputArchive / InputArchive), and what
// torch::save / torch::load write with them: tensors, lists of tensors,
// optimizers with their state. Modules are saved by kiln::save
// (frontend/checkpoint.h), or into an archive by Module::save.
//
// File format, version 1 (all integers little-endian; the frame and tensor
// records are the graph format's, runtime/binary_io.h):
//   "KILN-ARCHIVE\n"                    magic, 13 bytes
//   u32 version, u64 file size (all bytes, checksum included), u32 entry count
//   entries, each: u32 key parts, each u32 length and bytes (a key in nested
//     archives is its path); u8 kind (1 tensor, 2 double, 3 int64, 4 bool,
//     5 string, 6 an empty nested archive); then a tensor record with an empty
//     name (u8 is_buffer first), 8 bytes of the number, 1 byte of the bool, or
//     u32 length and the string's bytes
//   u64 checksum of every byte before it (io::checksum64)
// Files are written atomically; loading checks everything (a damaged, truncated
// or foreign file is a kiln::Error naming the file, never a crash). Tensors
// round-trip exactly: dtype, shape and every bit of their elements.
#pragma once

#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::serialize {

/// The format version this build writes and reads.
inline constexpr uint32_t kArchiveFormatVersion = 1;

/// What an archive holds under a key besides tensors and archives.
using ArchiveValue = std::variant<double, int64_t, bool, std::string>;

class OutputArchive {
 public:
  OutputArchive() = default;
  /// A dense CPU copy of `tensor` (any device, any layout), taken now.
  void write(const std::string& key, const Tensor& tensor, bool is_buffer = false);
  void write(const std::string& key, const OutputArchive& nested);
  void write(const std::string& key, double value);
  void write(const std::string& key, int64_t value);
  void write(const std::string& key, int value) { write(key, static_cast<int64_t>(value)); }
  void write(const std::string& key, bool value);
  void write(const std::string& key, const std::string& value);
  void write(const std::string& key, const char* value) { write(key, std::string(value)); }
  /// Writes the archive to `path` atomically, or to a stream.
  void save_to(const std::string& path) const;
  void save_to(std::ostream& stream) const;
  /// The bytes of the file save_to writes.
  std::string bytes() const;

 private:
  friend class InputArchive;
  struct Entry {
    std::vector<std::string> path;
    std::variant<Tensor, ArchiveValue, std::monostate> value;  // monostate: an empty nested archive
    bool is_buffer = false;
  };
  void add(std::vector<std::string> path, Entry e);
  std::vector<Entry> entries_;
};

class InputArchive {
 public:
  InputArchive() = default;
  /// Reads a file written by OutputArchive::save_to, checking all of it.
  void load_from(const std::string& path);
  void load_from(std::istream& stream);
  /// Parses the bytes of such a file; `name` is used in errors.
  void load_from_bytes(std::string bytes, const std::string& name);

  /// The tensor under `key`. A defined `tensor` of the same dtype and shape
  /// gets the values in place (no gradient recorded; its device kept); an
  /// undefined one is set to a new CPU tensor. Anything else, or a missing key,
  /// is a kiln::Error naming the archive and the key.
  void read(const std::string& key, Tensor& tensor, bool is_buffer = false);
  /// The same, false (and `tensor` unchanged) when the key is missing.
  bool try_read(const std::string& key, Tensor& tensor, bool is_buffer = false);
  void read(const std::string& key, InputArchive& nested);
  bool try_read(const std::string& key, InputArchive& nested);
  void read(const std::string& key, double& value);
  void read(const std::string& key, int64_t& value);
  void read(const std::string& key, bool& value);
  void read(const std::string& key, std::string& value);
  /// The keys at this level (tensors, values and nested archives), in order.
  std::vector<std::string> keys() const;

  struct Node;  // internal: one key's contents

 private:
  const Node& find(const std::string& key, const char* what) const;
  std::string name_ = "<archive>";
  std::shared_ptr<Node> root_;
  std::vector<std::string> prefix_;  // this archive's path in the file
};

}  // namespace kiln::serialize
