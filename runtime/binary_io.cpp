// Whole-file reads, durable atomic writes and the checksum (see binary_io.h).
#include "runtime/binary_io.h"

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/error.h"

namespace kiln::io {
namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little,
              "Kiln's file formats assume a little-endian host");

namespace {

std::string errno_str(int err) {
  return std::strerror(err);
}

// Closes a file descriptor on every path out of a scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

std::string read_file(const std::string& path) {
  Fd f;
  // O_NONBLOCK: opening a FIFO with no writer must not wait (it is refused below).
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) throw Error(path + ": cannot open (" + errno_str(errno) + ")");
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw Error(path + ": cannot stat (" + errno_str(errno) + ")");
  if (!S_ISREG(st.st_mode))
    throw Error(path + ": is " + file_kind(st.st_mode) + " (expected a regular file)");
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": read failed (" + errno_str(errno) + ")");
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

void write_file_durable(const std::string& path, std::string_view bytes) {
  static std::atomic<uint64_t> counter{0};
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    throw Error(path + ": " + what + " (" + errno_str(err) + ")");
  };
  {
    Fd f;
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f.fd < 0) throw Error(path + ": cannot write (" + errno_str(errno) + ")");
    const char* data = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
      ssize_t n = ::write(f.fd, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("write failed", errno);
      data += n;
      left -= static_cast<size_t>(n);
    }
    if (::fsync(f.fd) != 0) fail("fsync failed", errno);
    int fd = f.fd;
    f.fd = -1;
    if (::close(fd) != 0) fail("close failed", errno);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot replace the file", errno);
  // Make the rename itself durable.
  std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  Fd d;
  d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd >= 0) ::fsync(d.fd);
}

uint64_t checksum64(const void* data, size_t n) {
  constexpr uint64_t kPrime = 0x100000001b3ULL;        // FNV-1a 64-bit prime
  constexpr uint64_t kOffset = 0xcbf29ce484222325ULL;  // FNV-1a 64-bit offset basis
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h[4] = {kOffset, kOffset + 1, kOffset + 2, kOffset + 3};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      h[l] = (h[l] ^ w) * kPrime;
      h[l] ^= h[l] >> 32;
    }
  }
  for (; i < n; ++i) h[0] = (h[0] ^ p[i]) * kPrime;
  uint64_t r = fmix64(static_cast<uint64_t>(n));
  for (uint64_t lane : h) r = fmix64(r ^ lane) * kPrime;
  return fmix64(r);
}

void ByteWriter::patch_u64(size_t pos, uint64_t v) {
  for (int i = 0; i < 8; ++i) out_[pos + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace kiln::io
