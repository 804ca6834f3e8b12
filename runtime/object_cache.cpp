// ObjectCache: stable hashes and atomic, checked cache files (see object_cache.h).
#include "runtime/object_cache.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include "ir/error.h"
#include "runtime/binary_io.h"

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'O', 'B', 'J', '\0'};
constexpr uint32_t kFormatVersion = 1;

// Little-endian header, 40 bytes.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  uint64_t key_hash;
  uint64_t payload_size;
  uint64_t checksum;
};
static_assert(sizeof(Header) == 40);

// One stderr line per path (or per directory for write failures) and process.
void report_once(const std::string& what, const std::string& line) {
  static std::mutex mu;
  static auto* seen = new std::set<std::string>();  // never destroyed: compiles may run during exit
  std::lock_guard<std::mutex> lock(mu);
  if (!seen->insert(what).second) return;
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

uint64_t fnv1a64(std::string_view data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string stable_hash_hex(std::string_view data) {
  // FNV-1a twice, the second seeded differently and finished with splitmix64's
  // mixer, so the two halves are independent enough for a cache key.
  uint64_t a = fnv1a64(data);
  uint64_t b = fnv1a64(data, 0x84222325cbf29ce4ULL ^ data.size());
  b ^= b >> 30;
  b *= 0xbf58476d1ce4e5b9ULL;
  b ^= b >> 27;
  b *= 0x94d049bb133111ebULL;
  b ^= b >> 31;
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return out;
}

ObjectCache::ObjectCache(std::string dir) : dir_(std::move(dir)) {}

std::string ObjectCache::path(const std::string& key) const {
  return (std::filesystem::path(dir_) / (key + ".kobj")).string();
}

std::optional<std::string> ObjectCache::load(const std::string& key) const {
  const std::string p = path(key);
  auto damaged = [&](const std::string& reason) -> std::optional<std::string> {
    report_once(p, "kiln: damaged cache entry " + p + ": " + reason + "; recompiling");
    return std::nullopt;
  };
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(p, ec))) return std::nullopt;
  // The header first, checked against the file's size: a huge or foreign file is
  // refused before its payload is read. Every failure below is a kiln::Error
  // (memory included), so every damaged entry is a miss, never a thrown call.
  try {
    io::InputFile f(p);
    Header h;
    if (f.size() < sizeof h)
      return damaged("truncated header (" + std::to_string(f.size()) + " bytes)");
    std::memcpy(&h, f.read(0, sizeof h).data(), sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return damaged("bad magic");
    if (h.version != kFormatVersion || h.header_size != sizeof h)
      return damaged("format version " + std::to_string(h.version) + ", expected " +
                     std::to_string(kFormatVersion));
    if (h.key_hash != fnv1a64(key)) return damaged("entry is for another key");
    const uint64_t have = f.size() - sizeof h;
    if (h.payload_size != have)
      return damaged("payload is " + std::to_string(have) + " bytes, header says " +
                     std::to_string(h.payload_size));
    std::string payload = f.read(sizeof h, have);
    if (payload.size() != have) return damaged("the file changed while it was read");
    if (fnv1a64(payload) != h.checksum) return damaged("checksum mismatch");
    return payload;
  } catch (const Error& e) {
    return damaged(e.message());  // a directory, a device, an unreadable file, no memory
  }
}

void ObjectCache::discard(const std::string& key, const std::string& reason) const {
  const std::string p = path(key);
  report_once(p, "kiln: damaged cache entry " + p + ": " + reason + "; recompiling");
  std::error_code ec;
  std::filesystem::remove(p, ec);  // the recompiled entry replaces it in any case
}

void ObjectCache::store(const std::string& key, std::string_view payload) const {
  Header h;
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kFormatVersion;
  h.header_size = sizeof h;
  h.key_hash = fnv1a64(key);
  h.payload_size = payload.size();
  h.checksum = fnv1a64(payload);
  std::string entry(reinterpret_cast<const char*>(&h), sizeof h);
  entry.append(payload);
  const std::string p = path(key);
  try {
    io::write_file_durable(p, entry);
  } catch (const Error& e) {
    report_once(dir_, "kiln: cannot write kernel cache entry " + std::string(e.message()) +
                          "; continuing without it");
  }
}

}  // namespace kiln
