// Which ops of the op table (ir/ops.def) the fuzzer's programs reach. Its
// instruction set (tools/fuzz/ops.def) is a hand-kept list of frontend calls,
// chosen on purpose; this check keeps it honest: every op of the table is
// either recorded by some generated program or named in ops_not_drawn() with
// the reason, so a new op of the table fails `kiln-fuzz --op-coverage` until
// the fuzzer draws it or says why not.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/op.h"

namespace kiln::fuzz {

/// The table's ops that no instruction of the fuzzer records, each with why.
const std::vector<std::pair<OpKind, std::string>>& ops_not_drawn();

/// The math ops of the table with `arity` operands (1 or 2) that the generic
/// math instructions draw (tools/fuzz/ops.def): all but those ops_not_drawn() names.
const std::vector<OpKind>& math_ops_drawn(int arity);

/// The table's ops recorded by programs 0..programs-1 of `seed` (all features,
/// traced, with backward() inside the body where an input requires grad), as
/// traced, before the passes.
std::set<OpKind> ops_drawn(uint64_t seed, int64_t programs);

/// One line per op of the table that `drawn` lacks and ops_not_drawn() does not
/// name, or that it names although drawn; empty when the two agree. A
/// composite is never recorded (its expansion's ops are) and needs neither.
std::vector<std::string> coverage_problems(const std::set<OpKind>& drawn);

}  // namespace kiln::fuzz
