// split_scans: a scan along long lines (ir/scan_chunks.h says which) becomes
// three steps that run in parallel where the one fold ran on one thread a line:
//   x' = x as [lines, L], padded with zeros to m chunks of C and seen as [lines, m, C]
//   local = the scan of every chunk                   (lines * m short lines)
//   incl  = the scan of the chunks' last values       (one short line per line)
//   out   = where(first chunk, local, combine(incl of the chunk before, local))
// and back to the scan's shape (the padding, past the line's end in the scan's
// direction, is dropped; it only reaches the last chunk's total, which no chunk
// reads). The reference kernel folds in the same order, so eager and traced give
// the same bits.
#pragma once

#include "ir/graph.h"

namespace kiln {

Graph split_scans(const Graph& g);

}  // namespace kiln
