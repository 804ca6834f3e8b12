// Differential testing of one program: run it eagerly and traced on fresh
// copies of the same inputs, and compare every output, every .grad and the
// final value of every input after each call; shrink a failing program.
#pragma once

#include <optional>
#include <string>

#include "tools/fuzz/program.h"

namespace kiln::fuzz {

/// Why a program failed. `kind` is a category ("output", "grad", "throw", ...)
/// that shrinking keeps; `detail` says what differed.
struct Failure {
  std::string kind;
  std::string detail;
};

/// What checking a program found.
struct Verdict {
  std::optional<Failure> failure;
  bool both_threw = false;  // eager and traced raised a kiln::Error (not a failure)
  std::string error;        // then the eager one's message
};

/// Differences that a run may be told to let pass (--ignore).
struct CheckOptions {
  bool undefined_grad = false;  // an undefined .grad() equals an all-zero one
  bool requires_grad = false;   // outputs' requires_grad() are not compared
  bool sparse_indices = false;  // mutation mode: see MutationOptions::skip_sparse_indices
};
/// "undefined-grad,requires-grad" -> options; throws kiln::Error on an unknown name.
CheckOptions parse_ignored(const std::string& list);

/// Runs `p` eagerly and traced and compares (see the file comment).
Verdict check_program(const Program& p, const CheckOptions& o = {});

/// The smallest program found, by deleting instructions, outputs and inputs
/// and simplifying the rest, that still fails with the same kind as `p`.
Program shrink(const Program& p, const Failure& failure, const CheckOptions& o = {},
               int max_checks = 400);

}  // namespace kiln::fuzz
