// Eager composites run compiled: conv2d and the pooling ops are composites of
// table ops (nn_conv.cpp), which eagerly would run op by op, each materialising
// its windows, argmax masks and window sums, and backward as many more. Called
// eagerly on the CPU, such a composite runs instead as two cached compiled
// functions, as JAX runs each primitive through jit: its forward, and the
// gradient of its operands (the composite again, differentiated, traced over
// its operands and the output's gradient). The call is one tape node (a custom
// function, frontend/function.h) whose backward runs the compiled gradient;
// with create_graph it differentiates the composite eagerly instead, so the
// gradients have a history (double backward, as before).
//
// Each distinct composite (its op, attributes and weight shape: `key`) gets its
// own pair of functions, so only the batch size varies between its calls, which
// the JIT's signature cache and dynamic sizes handle. The values are the
// traced composite's, bit for bit; KILN_EAGER_KERNELS=0 or KILN_JIT=0 (eager
// debugging) run the composite op by op.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::detail {

/// The composite over its operands (defined tensors, in a fixed order).
using CompositeBody = std::function<Tensor(const std::vector<Tensor>&)>;

/// Whether a composite called now with these operands runs compiled: eagerly
/// (no trace, not inside another compiled composite), with the JIT and eager
/// kernels on, every operand on the CPU.
bool composite_runs_compiled(const std::vector<Tensor>& operands);

/// Runs `body`, the composite `op` (its name in errors), over `operands` through
/// the compiled functions of its key, op + "_" + `attrs` (made on first use;
/// `attrs` names everything the body depends on besides the operands' types).
/// Autograd as described above.
Tensor compiled_composite(const std::string& op, const std::string& attrs,
                          const CompositeBody& body, const std::vector<Tensor>& operands, Loc l);

/// How many composites have compiled functions, and how many calls ran
/// through them (tests).
size_t compiled_composites();
uint64_t compiled_composite_calls();

}  // namespace kiln::detail
