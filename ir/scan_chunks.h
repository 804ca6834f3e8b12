// Long scans fold in chunks. A scan whose lines are long and few would fold on
// one thread per line, one element after the other (each step waits for the
// last); folded in chunks of kScanChunk elements instead, the chunks of every
// line fold in parallel, each from the scan's identity, and each chunk's values
// are then combined with the running value of the chunks before it:
//   local[c][i] = x[c][0] (+) ... (+) x[c][i]       (in order, from the identity)
//   incl[c]     = incl[c-1] (+) local[c][last]       (incl[-1] the identity)
//   out[c][i]   = local[0][i] for c = 0, else incl[c-1] (+) local[c][i]
// with (+) the scan's combine op and c counted in the scan's direction. The
// choice depends only on the shape, never on the thread count, and both the
// reference kernel (runtime/reference_scan.cpp) and the compiler (the
// split_scans pass, which rewrites such a scan into these three steps) follow
// it, so eager and traced results keep the same bits. For integer scans the
// result is the one fold's (wrapping add and mul associate); a floating scan
// rounds as the three steps above (its error grows with the chunk length and
// the number of chunks, not with the line's length).
#pragma once

#include <cstdint>

#include "ir/shape.h"

namespace kiln {

/// Elements per chunk of a split scan.
inline constexpr int64_t kScanChunk = int64_t(1) << 14;
/// Lines shorter than this fold whole.
inline constexpr int64_t kScanSplitMinLine = int64_t(1) << 16;
/// With this many lines or more, the lines alone keep every thread busy.
inline constexpr int64_t kScanSplitMaxLines = 64;

/// The chunk length a scan along `dim` (normalised) of a result of `shape`
/// folds in, or 0 when its lines fold whole: lines of at least
/// kScanSplitMinLine contiguous elements (every dim after `dim` of extent 1),
/// fewer than kScanSplitMaxLines of them.
inline int64_t scan_chunk(const Shape& shape, int64_t dim) {
  if (dim < 0 || dim >= int64_t(shape.size())) return 0;
  int64_t lines = 1;
  for (int64_t k = 0; k < int64_t(shape.size()); ++k) {
    if (k > dim && shape[size_t(k)] != 1) return 0;
    if (k < dim) lines *= shape[size_t(k)];
  }
  if (shape[size_t(dim)] < kScanSplitMinLine || lines >= kScanSplitMaxLines || lines == 0) return 0;
  return kScanChunk;
}

}  // namespace kiln
