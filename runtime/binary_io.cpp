// Whole-file reads, durable atomic writes, the checksum, and the frame and
// tensor records of the graph and weights formats (see binary_io.h).
#include "runtime/binary_io.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <utility>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/error.h"
#include "ir/op.h"
#include "runtime/allocator.h"

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

// ---------------------------------------------------------------- reading files

InputFile::InputFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO with no writer must not wait (it is refused below).
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw Error(path + ": cannot open (" + errno_str(errno) + ")");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    throw Error(path + ": cannot stat (" + errno_str(err) + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error(path + ": is " + file_kind(st.st_mode) + " (expected a regular file)");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string InputFile::read(uint64_t offset, uint64_t n) const {
  n = offset >= size_ ? 0 : std::min(n, size_ - offset);
  check_host_bytes(static_cast<size_t>(n), "reading " + path_);
  std::string out;
  try {
    out.resize(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    throw Error("out of CPU memory: reading " + path_ + " needs " + std::to_string(n) +
                " bytes, which could not be allocated");
  }
  read_into(offset, out.data(), n);
  return out;
}

void InputFile::read_into(uint64_t offset, void* dst, uint64_t n) const {
  auto* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - done, uint64_t(1) << 30));
    ssize_t got = ::pread(fd_, p + done, chunk, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(path_ + ": read failed (" + errno_str(errno) + ")");
    if (got == 0)
      throw Error(path_ + ": the file ended at byte " + std::to_string(offset + done) +
                  " while it was read (expected " + std::to_string(n) + " bytes from byte " +
                  std::to_string(offset) + "; it had " + std::to_string(size_) +
                  " when opened: another process shortened it)");
    done += static_cast<uint64_t>(got);
  }
}

std::string read_file(const std::string& path) {
  InputFile f(path);
  std::string out = f.read(0, f.size());
  // A file that grew since it was opened (or reports no size, as /proc files do)
  // is read to its end.
  char buf[1 << 16];
  for (uint64_t at = out.size();;) {
    ssize_t n = ::pread(f.fd_, buf, sizeof buf, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": read failed (" + errno_str(errno) + ")");
    if (n == 0) break;
    check_host_bytes(out.size() + static_cast<size_t>(n), "reading " + path);
    out.append(buf, static_cast<size_t>(n));
    at += static_cast<uint64_t>(n);
  }
  return out;
}

// ---------------------------------------------------------------- writing files

namespace {

// Temporary files of write_file_durable: "<name>.tmp.<pid>.<n>".
constexpr std::string_view kTmpMarker = ".tmp.";
constexpr auto kStaleAge = std::chrono::minutes(10);

// The pid of a temporary file's name, or -1 when the name is not one.
long tmp_owner(std::string_view name) {
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return -1;
  size_t marker = name.rfind(kTmpMarker, dot - 1);
  if (marker == std::string_view::npos || marker == 0 || marker + kTmpMarker.size() >= dot)
    return -1;
  std::string_view pid = name.substr(marker + kTmpMarker.size(), dot - marker - kTmpMarker.size());
  std::string_view count = name.substr(dot + 1);
  auto digits = [](std::string_view d) {
    return !d.empty() && d.size() < 12 &&
           std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(pid) || !digits(count)) return -1;
  return std::stol(std::string(pid));
}

// Removes the temporary files a killed write left in `dir`: regular files
// named as ours whose process is gone and that nobody touched for kStaleAge (a
// process of another pid namespace sharing the directory looks gone from here,
// and its writes in progress are fresh). Once per directory per kStaleAge.
void remove_stale_temporaries(const std::string& dir) {
  static std::mutex mu;
  static auto* scanned = new std::map<std::string, std::chrono::steady_clock::time_point>();
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = scanned->find(dir);
    if (it != scanned->end() && now - it->second < kStaleAge) return;
    (*scanned)[dir] = now;
  }
  std::error_code ec;
  const auto wall_now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir.empty() ? "." : dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const long pid = tmp_owner(name);
    if (pid <= 0 || pid == ::getpid() || pid > INT32_MAX) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;  // alive, or not ours to know
    std::error_code e2;
    if (!it->is_regular_file(e2) || it->is_symlink(e2)) continue;
    auto modified = fs::last_write_time(it->path(), e2);
    if (e2 || wall_now - modified < kStaleAge) continue;
    fs::remove(it->path(), e2);
  }
}

// Where write_file_durable writes `path`: the path, or for a symbolic link to a
// regular file the file it names; with the permission bits of the file it
// replaces. rename() would replace anything at `path` (as root, -o /dev/null
// would replace /dev/null), so anything but a regular file is refused.
struct WriteTarget {
  std::string path;
  bool replaces = false;  // a file is there
  mode_t mode = 0;
};

WriteTarget write_target(const std::string& path) {
  WriteTarget t{path};
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR)
      throw Error(path + ": cannot stat (" + errno_str(errno) + ")");
    return t;
  }
  const bool link = S_ISLNK(st.st_mode);
  if (link && ::stat(path.c_str(), &st) != 0)
    throw Error(path + ": is a symbolic link to a missing file (" + errno_str(errno) +
                "); only a regular file is replaced (expected a regular file or a new path)");
  if (!S_ISREG(st.st_mode))
    throw Error(path + ": is " + (link ? "a symbolic link to " : "") + file_kind(st.st_mode) +
                "; only a regular file is replaced (expected a regular file or a new path)");
  if (link) {
    std::error_code ec;
    fs::path resolved = fs::canonical(path, ec);
    if (ec) throw Error(path + ": cannot resolve the symbolic link (" + ec.message() + ")");
    t.path = resolved.string();
  }
  t.replaces = true;
  t.mode = st.st_mode & 07777;
  return t;
}

}  // namespace

void check_write_target(const std::string& path) {
  (void)write_target(path);
}

void write_file_durable(const std::string& path, std::string_view bytes) {
  static std::atomic<uint64_t> counter{0};
  const WriteTarget w = write_target(path);
  const std::string& target = w.path;
  fs::path p(target);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  remove_stale_temporaries(dir);
  std::string tmp = target + std::string(kTmpMarker) + std::to_string(::getpid()) + "." +
                    std::to_string(counter++);
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    throw Error(path + ": " + what + " (" + errno_str(err) + ")");
  };
  {
    Fd f;
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f.fd < 0) throw Error(path + ": cannot write (" + errno_str(errno) + ")");
    // The file it replaces keeps its permissions (a private checkpoint stays private).
    if (w.replaces && ::fchmod(f.fd, w.mode) != 0) fail("cannot set permissions", errno);
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
  if (::rename(tmp.c_str(), target.c_str()) != 0) fail("cannot replace the file", errno);
  // Make the rename itself durable.
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

// ---------------------------------------------------------------- reading

std::string_view ByteReader::bytes(uint64_t n, const char* what) {
  if (n > remaining())
    throw Error(path_ + ": truncated at byte " + std::to_string(end_) + " in " + where +
                " (expected " + std::to_string(n) + " bytes of " + what + " at byte " +
                std::to_string(pos_) + ", " + std::to_string(remaining()) + " remain)");
  std::string_view v = data_.substr(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return v;
}

void ByteReader::malformed(const std::string& what, size_t at) const {
  throw Error(path_ + ": malformed " + where + " at byte " + std::to_string(at) + ": " + what);
}

void ByteReader::fail(const std::string& what) const {
  throw Error(path_ + ": " + what);
}

std::string quote_name(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out + "'";
}

// ---------------------------------------------------------------- frames

namespace {

constexpr size_t kChecksumBytes = 8;
constexpr uint32_t kMaxRank = 64;

// The dtype codes of the tensor records.
uint8_t dtype_code(DType t) {
  switch (t) {
    case DType::f32:
      return 1;
    case DType::f64:
      return 2;
    case DType::i32:
      return 3;
    case DType::i64:
      return 4;
    case DType::b8:
      return 5;
    case DType::u8:
      return 6;
    case DType::i8:
      return 7;
    case DType::i16:
      return 8;
  }
  return 0;
}

std::optional<DType> dtype_from_code(uint64_t c) {
  switch (c) {
    case 1:
      return DType::f32;
    case 2:
      return DType::f64;
    case 3:
      return DType::i32;
    case 4:
      return DType::i64;
    case 5:
      return DType::b8;
    case 6:
      return DType::u8;
    case 7:
      return DType::i8;
    case 8:
      return DType::i16;
    default:
      return std::nullopt;
  }
}

size_t header_bytes(const FrameFormat& f) {
  return f.magic.size() + 4 + 8 + 4;
}

// What a file that is not of the expected format is, when Kiln knows.
std::string foreign_hint(std::string_view data) {
  static constexpr std::pair<std::string_view, const char*> kKnown[] = {
      {"\x93NUMPY", "a NumPy .npy file"},
      {"KILN-GRAPH\n", "a Kiln graph file, for kiln::load(path)"},
      {"KILN-WEIGHTS\n", "a Kiln weights file, for kiln::load(module, path)"},
      {"KILN-OPTIMIZER\n", "a Kiln optimizer file, for kiln::load(optimizer, path)"},
      {"KILN-CHECKPOINT\n", "a Kiln checkpoint file, for kiln::load_checkpoint(path, ...)"},
  };
  for (const auto& [magic, what] : kKnown)
    if (data.starts_with(magic)) return std::string(" (it is ") + what + ")";
  return "";
}

}  // namespace

void begin_frame(ByteWriter& w, const FrameFormat& f, uint32_t count) {
  w.bytes(f.magic);
  w.u32(f.version);
  w.u64(0);  // the file size, filled in by end_frame
  w.u32(count);
}

void end_frame(ByteWriter& w, const FrameFormat& f) {
  w.patch_u64(f.magic.size() + 4, w.size() + kChecksumBytes);
  w.u64(checksum64(w.str().data(), w.size()));
}

namespace {

struct FrameHeader {
  uint64_t declared;  // the file size the header says
  uint32_t count;
};

// The header's checks, on `data` (the file's first bytes, or all of them) of a
// file of `size` bytes: the magic, the version, and a file no longer than it says.
FrameHeader check_frame_header(const std::string& path, std::string_view data, uint64_t size,
                               const FrameFormat& f) {
  std::string_view head = data.substr(0, std::min(data.size(), f.magic.size()));
  if (head != f.magic.substr(0, head.size()) || size == 0) {
    std::string_view name = f.magic.substr(0, f.magic.find('\n'));
    throw Error(path + ": not a " + f.kind + " (expected it to start with \"" + std::string(name) +
                "\")" + foreign_hint(data));
  }
  ByteReader hr(path, data, data.size());
  hr.bytes(f.magic.size(), "magic");
  auto version = static_cast<uint32_t>(hr.u(4, "format version"));
  if (version != f.version)
    throw Error(path + ": format version " + std::to_string(version) +
                " is not supported (this build reads version " + std::to_string(f.version) + ")");
  uint64_t declared = hr.u(8, "file size");
  auto count = static_cast<uint32_t>(hr.u(4, f.count_name));
  if (size > declared)
    throw Error(path + ": damaged: " + std::to_string(size - declared) +
                " unexpected bytes after the end of the file (byte " + std::to_string(declared) +
                ")");
  return {declared, count};
}

}  // namespace

std::string read_frame_file(const std::string& path, const FrameFormat& f) {
  InputFile file(path);
  // A file that is shorter than its header says is read whole all the same:
  // open_frame walks it to say where it ends.
  (void)check_frame_header(path, file.read(0, header_bytes(f)), file.size(), f);
  return file.read(0, file.size());
}

Frame open_frame(const std::string& path, std::string_view data, const FrameFormat& f,
                 const std::function<void(ByteReader&, uint32_t)>& locate_truncation) {
  const size_t size = data.size();
  const auto [declared, count] = check_frame_header(path, data, size, f);

  if (size < declared) {
    // Find where the data ends, by walking the body as far as it goes.
    ByteReader r(path, data, size);
    r.bytes(header_bytes(f), "header");
    if (locate_truncation) locate_truncation(r, count);
    r.where = "the checksum";
    r.bytes(kChecksumBytes, "checksum");
    throw Error(path + ": damaged: the header says the file has " + std::to_string(declared) +
                " bytes, it has " + std::to_string(size));
  }
  if (size < header_bytes(f) + kChecksumBytes)
    throw Error(path + ": damaged: the header says the file has " + std::to_string(declared) +
                " bytes, too few for a header and a checksum");
  uint64_t stored = load_le(data.data() + size - kChecksumBytes, 8);
  uint64_t actual = checksum64(data.data(), size - kChecksumBytes);
  if (stored != actual) throw Error(path + ": checksum mismatch (file damaged)");

  Frame out{count, ByteReader(path, data, size - kChecksumBytes)};
  out.body.bytes(header_bytes(f), "header");
  return out;
}

// ---------------------------------------------------------------- tensor records

void write_tensor_record(ByteWriter& w, std::string_view name, DType dtype, const Shape& shape,
                         const void* data) {
  w.u32(static_cast<uint32_t>(name.size()));
  w.bytes(name);
  w.u8(dtype_code(dtype));
  w.u32(static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) w.i64(d);
  auto bytes = static_cast<size_t>(byte_size(shape, dtype_size(dtype)));
  w.u64(bytes);
  if (bytes) w.bytes(data, bytes);
}

TensorRecord read_tensor_record(ByteReader& r) {
  TensorRecord p;
  uint64_t name_len = r.u(4, "name length");
  p.name = std::string(r.bytes(name_len, "name"));
  if (!p.name.empty()) r.where += " (" + quote_name(p.name) + ")";
  size_t at = r.pos();
  uint64_t code = r.u(1, "dtype");
  auto dt = dtype_from_code(code);
  if (!dt) r.malformed("unknown dtype code " + std::to_string(code) + " (expected 1..5)", at);
  p.dtype = *dt;
  at = r.pos();
  uint64_t rank = r.u(4, "rank");
  if (rank > kMaxRank) r.malformed("rank " + std::to_string(rank) + " (expected at most 64)", at);
  const size_t shape_at = r.pos();
  for (uint64_t d = 0; d < rank; ++d) {
    at = r.pos();
    auto dim = static_cast<int64_t>(r.u(8, "shape"));
    if (dim < 0)
      r.malformed("size " + std::to_string(dim) + " of dim " + std::to_string(d) +
                      " is negative (expected a size >= 0)",
                  at);
    p.shape.push_back(dim);
  }
  uint64_t want = 0;
  try {
    want = static_cast<uint64_t>(byte_size(p.shape, dtype_size(p.dtype)));
  } catch (const Error& e) {
    r.malformed(e.message(), shape_at);
  }
  at = r.pos();
  uint64_t data_len = r.u(8, "data length");
  p.data = r.bytes(data_len, "data");
  if (data_len != want)
    r.malformed("data length " + std::to_string(data_len) + " (expected " + std::to_string(want) +
                    " for " + TensorType{p.dtype, p.shape, {}}.str() + ")",
                at);
  if (p.dtype == DType::b8)
    for (size_t k = 0; k < p.data.size(); ++k)
      if (static_cast<unsigned char>(p.data[k]) > 1)
        r.malformed("bool element " + std::to_string(k) + " holds byte " +
                        std::to_string(static_cast<unsigned char>(p.data[k])) +
                        " (expected 0 or 1)",
                    at + 8 + k);
  return p;
}

}  // namespace kiln::io
