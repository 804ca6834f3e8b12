// Printing a program as C++ to paste into a test (tools/fuzz/reproducer.cpp).
#pragma once

#include <string>

#include "tools/fuzz/program.h"

namespace kiln::fuzz {

/// A doctest TEST_CASE named `title` that runs `p` eagerly and traced and
/// CHECKs that every output, .grad() and input value agree.
std::string reproducer(const Program& p, const std::string& title);

}  // namespace kiln::fuzz
