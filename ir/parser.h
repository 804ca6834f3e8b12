// Parser for the canonical IR text (see printer.h). Malformed text is a
// kiln::Error naming the line, the column and what was expected.
#pragma once

#include <string_view>

#include "ir/graph.h"

namespace kiln {

/// Parses a whole graph. Node ids are renumbered densely in text order; types
/// given in the text are checked against the op table's rules.
Graph parse_graph(std::string_view text, std::string_view source_name = "<ir>");

}  // namespace kiln
