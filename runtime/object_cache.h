// The on-disk cache of compiled kernel binaries (CPU object files; later PTX
// or cubins). An entry is one file `<dir>/<key>.kobj`: a header (magic,
// format version, key hash, payload size, payload checksum) and the payload.
// Writes are atomic (temp file, fsync, rename), so readers never see half an
// entry; a damaged or truncated entry (or one that cannot be read at all, such
// as a directory in its place) is reported once on stderr, treated as a miss
// and overwritten by the recompiled one when that is possible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

/// 64-bit FNV-1a: stable across runs, compilers and platforms (std::hash is not).
uint64_t fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ULL);

/// A stable 128-bit hash of `data` as 32 lowercase hex digits (two independent
/// 64-bit hashes), for cache keys and kernel symbol names.
std::string stable_hash_hex(std::string_view data);

class ObjectCache {
 public:
  /// A cache in `dir` (created on the first store).
  explicit ObjectCache(std::string dir);

  /// The payload stored under `key`, or nullopt when there is none or it is
  /// damaged (then one line goes to stderr: "kiln: damaged cache entry <path>:
  /// <reason>; recompiling", once per path per process).
  std::optional<std::string> load(const std::string& key) const;

  /// Reports once, like any damaged entry, a payload that load() returned and
  /// its user could not use (an object that does not link, or lacks its kernel:
  /// another kernel's, or garbage under a valid header and checksum), and removes
  /// it. The caller compiles again and stores the result.
  void discard(const std::string& key, const std::string& reason) const;

  /// Stores `payload` under `key` atomically, replacing any entry. Failures (an
  /// unwritable directory, a full disk) are reported once on stderr and otherwise
  /// ignored: the cache is an optimisation.
  void store(const std::string& key, std::string_view payload) const;

  /// The file an entry lives in.
  std::string path(const std::string& key) const;

 private:
  std::string dir_;
};

}  // namespace kiln
