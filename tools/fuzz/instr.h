// One fuzzer instruction, run and printed: run_instr() calls Kiln's frontend API,
// cpp() writes the same call as C++ source for a reproducer. The two are kept
// side by side in instr.cpp so that what runs is what is printed..
#pragma once

#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "ir/op.h"
#include "tools/fuzz/program.h"

namespace kiln::fuzz {

/// How the generic math instructions (math, math2) apply a math op of the table:
/// operand i is taken into [lo[i], hi[i]] (the row's domain, narrowed about its
/// middle while the op's values would pass kMathBound, as exp's), and |result| <= bound.
struct MathForm {
  double lo[2], hi[2];
  double bound;
};
constexpr double kMathBound = 100;
/// Throws kiln::Error for an op that is not a math op of the table.
MathForm math_form(OpKind k);

/// Runs a value instruction (not a nograd marker) on `values` (by value number).
Tensor run_instr(const Instr& in, const std::vector<Tensor>& values);

/// The C++ expression apply() evaluates, with operands named by `names`.
std::string cpp(const Instr& in, const std::vector<std::string>& names);

/// `x` as a C++ literal that reads back exactly ("0.1", "-2.5e-07", "1.0").
std::string number_literal(double x);

}  // namespace kiln::fuzz
