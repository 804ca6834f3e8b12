// The soak's cache damager (tools/soak): another process that keeps damaging
// the kernel disk cache the soak's workers use. It truncates entries, flips
// bytes, replaces them with garbage, with another entry's file, or with another
// kernel's object (or garbage) under a valid header and checksum, makes them
// huge and sparse, deletes them, puts a directory, a FIFO or a link to
// /dev/zero in their place, removes what it put there, and now and then wipes
// the whole cache (every kernel then compiles again from scratch).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace kiln::soak {

/// The damaging loop, run by `kiln-soak --damager DIR` in the child process:
/// one damage every 20 to 100 ms until SIGTERM or the parent's death, then one
/// line of counts on stdout ("actions N: truncate n, ..."). Returns the exit code.
int run_damager(const std::string& dir, uint64_t seed, pid_t parent);

/// The damager as a child process of this program (/proc/self/exe --damager).
class DamagerProcess {
 public:
  /// Starts it on `dir`; throws std::runtime_error when it cannot.
  DamagerProcess(const std::string& dir, uint64_t seed);
  ~DamagerProcess();
  DamagerProcess(const DamagerProcess&) = delete;
  DamagerProcess& operator=(const DamagerProcess&) = delete;
  /// Stops it (SIGTERM) and returns its line of counts; "" and `error` set when
  /// it died or did not report.
  std::string stop(std::string* error);
  /// Whether it is still running (it must be, the whole soak).
  bool running();

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool exited_ = false;  // reaped by running()
  int status_ = 0;
};

}  // namespace kiln::soak
