// The scalar expression of each elementwise op, written into kernel IR. Adding
// an elementwise op to the table means one case here (DESIGN.md, "One op table").
#pragma once

#include <span>

#include "codegen/kernel_builder.h"
#include "ir/graph.h"

namespace kiln {

/// The value of elementwise node `n` (unary, binary or where) given its operands'
/// values at one element, which may be of any dtype: they are converted as the
/// reference kernels convert them. Constant exponents of pow up to 4 (and -1, -2
/// for floats) become multiplications.
kir::ValueId lower_elementwise(kir::KernelBuilder& kb, const Node& n,
                               std::span<const kir::ValueId> operands);

}  // namespace kiln
