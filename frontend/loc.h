// The caller's source line, which every public frontend call takes as a
// defaulted last parameter (KILN_LOC) so errors, dumps and the IR can name it.
#pragma once

#include <source_location>

namespace kiln {

using Loc = std::source_location;
#define KILN_LOC ::kiln::Loc loc = ::kiln::Loc::current()

}  // namespace kiln
