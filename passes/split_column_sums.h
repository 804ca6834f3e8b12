// split_column_sums: a float sum over the leading dims of a large row-major
// tensor (a bias's gradient: dY [rows, cols] -> [cols]) becomes two sums:
//   x' = x as [rows, cols], padded with zero rows to k chunks of h rows: [k, h, cols]
//   partial = the sum over each chunk's rows        [k, cols]  (k chunks in parallel)
//   out     = the sum of the partials, in order      [cols]
// A CPU thread then reads each chunk as one contiguous run of whole rows (the
// hardware prefetcher's best case) into a row of partial sums, where the one
// sum split the columns between threads and read every row's slice of them: a
// run of 1 KiB at each 4 KiB page, from cache at a quarter of the bandwidth of
// a contiguous read. The chunking depends only on the shape, never on the
// thread count, so a result has the same bits at every thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace kiln {

/// Elements a chunk of rows aims at (128 KiB of f32).
inline constexpr int64_t kColumnSumChunk = int64_t(1) << 15;

/// The most columns a split sum has: a chunk is at least 8 rows, and a row of
/// partial sums (16 KiB of f32) stays in L1 beside the rows streaming through.
inline constexpr int64_t kColumnSumMaxColumns = 4096;

/// Rows per chunk of a sum of `shape` over `dims` (normalised and sorted), or 0
/// when it folds whole: dims must be the leading ones, the remaining columns
/// (their product) between 16 and kColumnSumMaxColumns, and the rows at least
/// four chunks' worth (below that the second step's dispatch costs about what
/// the split gains: [2049, 33] measured slower split). The rows split into the fewest chunks of at most
/// kColumnSumChunk elements, as even as can be: k = ceil(rows / (chunk / cols)),
/// h = ceil(rows / k).
int64_t column_sum_rows_per_chunk(const Shape& shape, const std::vector<int64_t>& dims);

Graph split_column_sums(const Graph& g);

}  // namespace kiln
