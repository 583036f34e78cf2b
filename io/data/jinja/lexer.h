// The tokens of a Jinja template, as Hugging Face's chat templates are written and as
// transformers' apply_chat_template reads them: jinja2 with trim_blocks and lstrip_blocks on
// (a block tag's line keeps no indentation before it nor the newline after it), `-` on a tag
// strips the whitespace on that side, `+` keeps it, comments `{# #}` vanish.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace megacpp::io::data::jinja {

enum class TokenKind {
  kText,        // literal output
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value: the unescaped text
  kInteger,
  kFloat,
  kOperator,    // + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string value;
  int line = 1;  // of the template, for errors
};

// Throws std::invalid_argument "NAME:LINE: ..." for an unclosed tag, string or comment, or a
// character no token starts with.
std::vector<Token> tokenize(const std::string& source, const std::string& name);

}  // namespace megacpp::io::data::jinja
