// Jinja's grammar, the part chat templates use: if/elif/else, for (with else, a filter
// condition, loop.*, break and continue), set (of a variable, a namespace's attribute, or a
// block), macro, generation (transparent); expressions with jinja2's precedence, filters,
// tests, calls, subscripts and slices.
#pragma once

#include <string>

#include "io/data/jinja/ast.h"
#include "io/data/jinja/lexer.h"

namespace megacpp::io::data::jinja {

// Throws std::invalid_argument "NAME:LINE: ..." naming what was expected.
Body parse(const std::vector<Token>& tokens, const std::string& name);

}  // namespace megacpp::io::data::jinja
