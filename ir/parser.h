// Parser for the canonical IR text (see printer.h). Malformed text is a
// kiln::Error naming the line, the column and what was expected.
#pragma once

#include <string_view>

#include "ir/graph.h"

namespace kiln {

/// Parses a whole graph. Node ids are renumbered densely in text order; value
/// names may be any %word (%0, %x). Types given in the text are checked against
/// the op table's rules; for ops whose type the table infers they may be left
/// out ("%2 = add %0, %1"). `//` starts a comment. The result is verified.
/// Errors read "<source_name>:line:col: expected X, got Y". With `require_return`,
/// text without a `return` line is an error (a saved graph must say what it returns).
Graph parse_graph(std::string_view text, std::string_view source_name = "<ir>",
                  bool require_return = false);

}  // namespace kiln
