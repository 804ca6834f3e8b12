// Kernel templates: one compiled kernel for a group at every size of a dynamic
// dimension.
//
// A traced function whose batch size changes lowers each group again at the new
// size (lowering is cheap), and most kernels come out identical but for a few
// constants: the outer range, a loop trip count over the batch, a 1/B of a mean,
// a stride. Kernels that print the same with those left out share a *skeleton*.
// generalize() turns the constants in which two kernels of one skeleton differ
// into run-time parameters (kernel_ir.h); bind() checks that another kernel is an
// instance of a template, equal at every other constant, and returns the
// parameter values that make the template compute it. The template, run with
// those values, computes the instance's kernel IR: nothing about the sizes is
// guessed. (As for any kernel, the backend may reassociate sums, and a run-time
// trip count may split a sum differently than a static one: the last bits of a
// reduction can differ from the kernel compiled for the sizes.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::kir {

/// The kernel's text with its constants, trip counts, range and buffer shapes left out.
std::string skeleton(const Kernel& k);

/// How many constants and trip counts of two kernels of one skeleton differ.
int64_t count_differences(const Kernel& a, const Kernel& b);

/// A template of `a` whose constants and trip counts are parameters wherever `a`
/// and `b` (a kernel of the same skeleton) differ, and wherever `also` (a template
/// of the same skeleton, or null) has them. Buffers whose shapes differ are sized
/// at run time.
Kernel generalize(const Kernel& a, const Kernel& b, const Kernel* also = nullptr);

/// The parameter values (i64, or the bits of an f64) with which template `t`
/// computes `k`, or nullopt when k differs from t anywhere but t's parameters.
std::optional<std::vector<int64_t>> bind(const Kernel& t, const Kernel& k);

/// Kernels of one plan that differ only in constants and sizes (the Adam update
/// of each parameter, the bias gradient of each layer): one template computes
/// every member, each with its own parameters.
struct Family {
  Kernel templ;
  std::vector<size_t> members;               // indices into the kernels given, ascending
  std::vector<std::vector<int64_t>> params;  // per member: bind(templ, that kernel)
};

/// The families among `kernels`: two or more of them with one skeleton and the
/// same strides and divisors in their index arithmetic (as parameters, those
/// cost a hardware division per element and strided loads). The template is
/// generalised only where members differ (no parameters when they are all the
/// same kernel).
std::vector<Family> families(const std::vector<const Kernel*>& kernels);

}  // namespace kiln::kir
