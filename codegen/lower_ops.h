// The scalar expression of each elementwise op, written into kernel IR: by the
// op table's `scalar` column (ir/ops.def), and by hand for its `custom` rows.
#pragma once

#include <span>

#include "codegen/kernel_builder.h"
#include "ir/graph.h"

namespace kiln {

/// The value of elementwise node `n` (unary, binary or where) given its operands'
/// values at one element, which may be of any dtype: they are converted as the
/// reference kernels convert them.
kir::ValueId lower_elementwise(kir::KernelBuilder& kb, const Node& n,
                               std::span<const kir::ValueId> operands);

}  // namespace kiln
