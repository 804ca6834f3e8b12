// The cache damager: a process that keeps damaging kernel-cache entries (damager.h).
#include "tools/soak/damager.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "runtime/object_cache.h"

extern char** environ;

namespace kiln::soak {

namespace fs = std::filesystem;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_term(int) {
  g_stop = 1;
}

enum Kind {
  kTruncate,
  kFlip,
  kGarbage,
  kForeign,
  kRelabel,
  kValidGarbage,
  kHuge,
  kDelete,
  kDirectory,
  kFifo,
  kSymlink,
  kRepair,
  kWipe,
  kKinds
};
const char* const kKindNames[kKinds] = {
    "truncate", "flip",      "garbage", "foreign", "relabel", "valid-garbage", "huge",
    "delete",   "directory", "fifo",    "symlink", "repair",  "wipe"};
// Relative frequencies; a wipe is rare (about one action in 500: it clears the
// whole cache, and the cache should mostly hold entries to damage and to read).
const int kWeights[kKinds] = {60, 75, 40, 40, 40, 40, 20, 50, 20, 15, 15, 75, 1};

constexpr size_t kHeaderSize = 40;  // runtime/object_cache.cpp's header
constexpr size_t kMaxRead = 4u << 20;

bool is_regular(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A regular file's bytes, when it is small enough to be an entry Kiln wrote.
std::optional<std::string> read_small(const std::string& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) <= kMaxRead) {
    std::string s(size_t(st.st_size), '\0');
    if (::pread(fd, s.data(), s.size(), 0) == ssize_t(s.size())) out = std::move(s);
  }
  ::close(fd);
  return out;
}

void remove_any(const std::string& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

class Damager {
 public:
  Damager(std::string dir, uint64_t seed) : dir_(std::move(dir)), rng_(seed) {}

  void once() {
    std::vector<std::string> entries;
    std::error_code ec;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".kobj") entries.push_back(it->path().string());
    if (entries.empty()) return;
    const Kind k = pick_kind();
    const std::string& p = entries[rng_() % entries.size()];
    if (apply(k, p, entries)) ++counts_[k];
  }

  std::string report() const {
    long total = 0;
    for (long c : counts_) total += c;
    std::string s = "actions " + std::to_string(total) + ":";
    for (int k = 0; k < kKinds; ++k)
      s += std::string(k ? ", " : " ") + kKindNames[k] + " " + std::to_string(counts_[k]);
    return s;
  }

 private:
  Kind pick_kind() {
    int total = 0;
    for (int w : kWeights) total += w;
    int r = int(rng_() % uint64_t(total));
    for (int k = 0; k < kKinds; ++k)
      if ((r -= kWeights[k]) < 0) return Kind(k);
    return kFlip;
  }

  std::string random_bytes(size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = char(rng_());
    return s;
  }

  // Puts `bytes` at p by rename, as a writer would (a directory there refuses it).
  bool replace(const std::string& p, const std::string& bytes) {
    const std::string tmp =
        dir_ + "/.damager-" + std::to_string(::getpid()) + "-" + std::to_string(n_++);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const bool ok = ::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size());
    ::close(fd);
    if (ok && ::rename(tmp.c_str(), p.c_str()) == 0) return true;
    ::unlink(tmp.c_str());
    return false;
  }

  std::optional<std::string> other_entry(const std::string& p,
                                         const std::vector<std::string>& entries) {
    for (int tries = 0; tries < 8; ++tries) {
      const std::string& o = entries[rng_() % entries.size()];
      if (o == p) continue;
      if (auto bytes = read_small(o); bytes && bytes->size() > kHeaderSize) return bytes;
    }
    return std::nullopt;
  }

  static void put_u64(std::string& s, size_t at, uint64_t v) { std::memcpy(s.data() + at, &v, 8); }

  bool apply(Kind k, const std::string& p, const std::vector<std::string>& entries) {
    const std::string key = fs::path(p).stem().string();
    switch (k) {
      case kTruncate: {
        struct stat st {};
        if (!is_regular(p) || ::stat(p.c_str(), &st) != 0 || st.st_size == 0) return false;
        return ::truncate(p.c_str(), off_t(rng_() % uint64_t(st.st_size))) == 0;
      }
      case kFlip: {
        int fd = ::open(p.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) return false;
        struct stat st {};
        bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
                  size_t(st.st_size) <= kMaxRead;
        for (int i = 0, n = 1 + int(rng_() % 4); ok && i < n; ++i) {
          const off_t at = off_t(rng_() % uint64_t(st.st_size));
          unsigned char b = 0;
          ok = ::pread(fd, &b, 1, at) == 1;
          b ^= static_cast<unsigned char>(1 + rng_() % 255);
          ok = ok && ::pwrite(fd, &b, 1, at) == 1;
        }
        ::close(fd);
        return ok;
      }
      case kGarbage:
        return replace(p, random_bytes(rng_() % 2048));
      case kForeign: {
        auto other = other_entry(p, entries);
        return other && replace(p, *other);
      }
      case kRelabel: {  // another kernel's object under a header valid for this key
        auto other = other_entry(p, entries);
        if (!other) return false;
        put_u64(*other, 16, fnv1a64(key));
        return replace(p, *other);
      }
      case kValidGarbage: {  // garbage under a valid header and checksum
        const std::string payload = random_bytes(64 + rng_() % 4096);
        std::string entry(kHeaderSize, '\0');
        std::memcpy(entry.data(), "KILNOBJ", 8);
        const uint32_t version = 1, header_size = kHeaderSize;
        std::memcpy(entry.data() + 8, &version, 4);
        std::memcpy(entry.data() + 12, &header_size, 4);
        put_u64(entry, 16, fnv1a64(key));
        put_u64(entry, 24, payload.size());
        put_u64(entry, 32, fnv1a64(payload));
        return replace(p, entry + payload);
      }
      case kHuge:  // 64 GiB, sparse: the reader must refuse it from its size
        return is_regular(p) && ::truncate(p.c_str(), off_t(1) << 36) == 0;
      case kDelete:
        remove_any(p);
        return true;
      case kDirectory:
        remove_any(p);
        return ::mkdir(p.c_str(), 0755) == 0;
      case kFifo:
        remove_any(p);
        return ::mkfifo(p.c_str(), 0644) == 0;
      case kSymlink:
        remove_any(p);
        return ::symlink("/dev/zero", p.c_str()) == 0;
      case kRepair: {  // what Kiln cannot replace by rename goes again
        for (const std::string& e : entries)
          if (!is_regular(e)) {
            remove_any(e);
            return true;
          }
        return false;
      }
      case kWipe:
        for (const std::string& e : entries) remove_any(e);
        return true;
      case kKinds:
        break;
    }
    return false;
  }

  std::string dir_;
  std::mt19937_64 rng_;
  long counts_[kKinds] = {};
  uint64_t n_ = 0;
};

}  // namespace

int run_damager(const std::string& dir, uint64_t seed, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  struct sigaction sa {};
  sa.sa_handler = on_term;
  ::sigaction(SIGTERM, &sa, nullptr);
  Damager d(dir, seed);
  std::mt19937_64 pause(seed + 1);
  while (!g_stop && ::getppid() == parent) {
    d.once();
    ::usleep(useconds_t(20000 + pause() % 80000));
  }
  std::printf("%s\n", d.report().c_str());
  std::fflush(stdout);
  return 0;
}

DamagerProcess::DamagerProcess(const std::string& dir, uint64_t seed) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  const std::string seed_s = std::to_string(seed), parent_s = std::to_string(::getpid());
  std::vector<std::string> args = {"kiln-soak", "--damager", dir,     "--seed",
                                   seed_s,      "--parent",  parent_s};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    throw std::runtime_error("cannot start the damager: " + std::string(std::strerror(rc)));
  }
  out_fd_ = out[0];
}

DamagerProcess::~DamagerProcess() {
  std::string ignored;
  if (pid_ > 0) stop(&ignored);
}

bool DamagerProcess::running() {
  if (pid_ <= 0 || exited_) return false;
  exited_ = ::waitpid(pid_, &status_, WNOHANG) == pid_;
  return !exited_;
}

std::string DamagerProcess::stop(std::string* error) {
  if (pid_ <= 0) return "";
  ::kill(pid_, SIGTERM);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(out_fd_, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, size_t(n));
  }
  ::close(out_fd_);
  out_fd_ = -1;
  if (!exited_) ::waitpid(pid_, &status_, 0);
  const int status = status_;
  pid_ = -1;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || text.rfind("actions ", 0) != 0) {
    *error = "the damager process ended badly (status " + std::to_string(status) + ", said '" +
             text + "')";
    return "";
  }
  return text;
}

}  // namespace kiln::soak
