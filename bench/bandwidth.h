// A STREAM-style triad (a = b + s*c over both cores): the bandwidth probe every
// benchmark binary reports its figures against, measured in the same run.
#pragma once

#include <cstdint>

namespace kiln::bench {

struct TriadBuffers {
  explicit TriadBuffers(int64_t n);
  ~TriadBuffers();
  TriadBuffers(const TriadBuffers&) = delete;
  TriadBuffers& operator=(const TriadBuffers&) = delete;
  float *a, *b, *c;
  int64_t n;
};

/// One pass of a[i] = b[i] + 3 * c[i], split over the thread pool.
void triad(TriadBuffers& buf);

/// Triad bandwidth (bytes/s, counting 3 arrays of 4-byte floats) on `buf`, the
/// best of `passes` passes, measured now.
double measure_triad_bytes_per_second(TriadBuffers& buf, int passes);

/// Triad bandwidth measured once per process on 16M floats (best of 10 passes)
/// and cached.
double triad_bytes_per_second();

/// How much of the machine's cores this process held since it was made: process
/// CPU time (every thread's, spin-waits included) over wall time, per core that
/// parallel_for uses. Under 1 when other processes took the cores: an op bound
/// by its arithmetic then slows by that much, a memory-bound one (the triad) far
/// less, because one core alone nearly saturates memory bandwidth on a small VM.
class CoresHeld {
 public:
  CoresHeld();
  double fraction() const;

 private:
  double cpu0_, wall0_;
};

/// Runs the benchmarks `registered` adds, under the context lines every JIT
/// benchmark reports: the OpenBLAS kernels, the LLVM target and triad bandwidth.
int run_benchmarks(int argc, char** argv, void (*registered)());

}  // namespace kiln::bench
