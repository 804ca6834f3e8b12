// What a row-parallel kernel's values are known to be because of how the row
// was reduced: facts about kernel IR that let a code generator emit less work
// for the same values (a reciprocal computed once per row, exp without its
// upper clamp). Backend-neutral: kernel IR in, yes or no out.
#pragma once

#include "codegen/kernel_ir.h"

namespace kiln::kir {

/// Whether `v` is arithmetic (+, -, *) over the outer index i0, i64 constants and
/// i64 parameters: the same value for every element of one outer iteration's row.
bool is_row_offset(const Kernel& k, ValueId v);

/// Whether `v` is x - m, x an element of a row (a load at row offset + inner
/// index) and m that row's max: a max reduction whose every update folds in the
/// same buffer's element at the same row offset, over an inner loop of the same
/// extent, with no store to that buffer in the kernel. Then v is at most 0 or NaN
/// (m is NaN or at least x; inf - inf and -inf - -inf are NaN).
bool below_row_max(const Kernel& k, ValueId v);

/// Whether `v` is one value for the whole row: made of at least one finished
/// reduction (an accumulator read after its loop; not a scan's running value or
/// an argreduce's position), constants and parameters.
bool row_invariant(const Kernel& k, ValueId v);

}  // namespace kiln::kir
