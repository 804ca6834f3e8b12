// Resident memory of this process (Linux /proc/self/status and getrusage): the
// peaks bench_peak_rss and bench_scale report.
#pragma once

namespace kiln::bench {

/// A field of /proc/self/status such as "VmRSS:  1234 kB", in KiB; -1 when absent.
long status_kib(const char* key);

/// Resets VmHWM to the current VmRSS (writes 5 to /proc/self/clear_refs; Linux
/// 4.0 and later); false where that is refused. getrusage's ru_maxrss follows:
/// it reports the peak since the last reset.
bool reset_peak();

/// Returns free memory to the system: Kiln's cached CPU blocks and glibc's free
/// heap (malloc_trim), so that a baseline taken next holds only live memory.
void release_free_memory();

}  // namespace kiln::bench
