#include "io/data/jinja/lexer.h"

#include <cctype>
#include <cstdint>
#include <stdexcept>

#include "io/serialization/text_encoding.h"

namespace megacpp::io::data::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& name) : s_(source), name_(name) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const size_t start = next_tag(pos_);
      std::string text = s_.substr(pos_, start - pos_);
      if (start == s_.size()) {
        emit_text(text);
        break;
      }
      const char kind = s_[start + 1];
      const char modifier = start + 2 < s_.size() ? s_[start + 2] : '\0';
      if (modifier == '-') {
        text.erase(text.find_last_not_of(" \t\n\r\f\v") + 1);
      } else if (kind != '{' && modifier != '+') {
        strip_line_indent(text);
      }
      emit_text(text);
      count_lines(pos_, start);
      pos_ = start + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (kind == '#') {
        comment();
      } else {
        tag(kind == '{');
      }
    }
    tokens_.push_back({TokenKind::kEnd, "", line_});
    return tokens_;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(name_ + ":" + std::to_string(line_) + ": " + what);
  }

  size_t next_tag(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i) {
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return s_.size();
  }

  // lstrip_blocks: spaces and tabs between the line's start and a block or comment tag go.
  void strip_line_indent(std::string& text) const {
    const size_t newline = text.rfind('\n');
    const size_t from = newline == std::string::npos ? 0 : newline + 1;
    if (text.find_first_not_of(" \t", from) != std::string::npos) return;
    if (newline == std::string::npos && pos_ != 0 && s_[pos_ - 1] != '\n') return;  // a line that began before the text
    text.erase(from);
  }

  void emit_text(const std::string& text) {
    if (!text.empty()) tokens_.push_back({TokenKind::kText, text, line_});
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < s_.size(); ++i) line_ += s_[i] == '\n';
  }

  // After a tag: `-` strips all whitespace, a block tag without `+` drops one newline (trim_blocks).
  void after_tag(bool strip, bool trim) {
    if (strip) {
      const size_t from = pos_;
      while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
      count_lines(from, pos_);
    } else if (trim) {
      if (s_.compare(pos_, 2, "\r\n") == 0) {
        pos_ += 2;
        ++line_;
      } else if (pos_ < s_.size() && s_[pos_] == '\n') {
        ++pos_;
        ++line_;
      }
    }
  }

  void comment() {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) fail("comment {# without #}");
    const bool strip = end > pos_ && s_[end - 1] == '-';
    const bool keep = end > pos_ && s_[end - 1] == '+';
    count_lines(pos_, end);
    pos_ = end + 2;
    after_tag(strip, !keep);
  }

  void tag(bool variable) {
    tokens_.push_back({variable ? TokenKind::kVarBegin : TokenKind::kBlockBegin, "", line_});
    const char close = variable ? '}' : '%';
    while (true) {
      const size_t from = pos_;
      while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
      count_lines(from, pos_);
      if (pos_ >= s_.size()) fail(std::string("tag ") + (variable ? "{{ without }}" : "{% without %}"));
      const char c = s_[pos_];
      const bool strip = (c == '-' || c == '+') && pos_ + 2 < s_.size() && s_[pos_ + 1] == close && s_[pos_ + 2] == '}';
      if (strip || (c == close && pos_ + 1 < s_.size() && s_[pos_ + 1] == '}')) {
        tokens_.push_back({variable ? TokenKind::kVarEnd : TokenKind::kBlockEnd, "", line_});
        pos_ += strip ? 3 : 2;
        after_tag(strip && c == '-', !variable && !(strip && c == '+'));
        return;
      }
      token();
    }
  }

  void token() {
    const char c = s_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      tokens_.push_back({TokenKind::kName, s_.substr(start, pos_ - start), line_});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      number();
    } else if (c == '\'' || c == '"') {
      string(c);
    } else {
      for (const char* op : {"//", "**", "==", "!=", "<=", ">="}) {
        if (s_.compare(pos_, 2, op) == 0) {
          tokens_.push_back({TokenKind::kOperator, op, line_});
          pos_ += 2;
          return;
        }
      }
      if (std::string("+-*/%~<>=()[]{},.:|").find(c) == std::string::npos) fail(std::string("unexpected character '") + c + "'");
      tokens_.push_back({TokenKind::kOperator, std::string(1, c), line_});
      ++pos_;
    }
  }

  void number() {
    const size_t start = pos_;
    bool real = false;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))) {
      real = true;
      ++pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      real = true;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    tokens_.push_back({real ? TokenKind::kFloat : TokenKind::kInteger, s_.substr(start, pos_ - start), line_});
  }

  // Python's string escapes, as jinja2 decodes them.
  void string(char quote) {
    std::string value;
    const int line = line_;
    for (++pos_; pos_ < s_.size() && s_[pos_] != quote; ++pos_) {
      char c = s_[pos_];
      line_ += c == '\n';
      if (c != '\\' || pos_ + 1 >= s_.size()) {
        value += c;
        continue;
      }
      c = s_[++pos_];
      switch (c) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '0': value += '\0'; break;
        case 'x': case 'u': case 'U': {
          const size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
          if (pos_ + digits >= s_.size()) fail("truncated \\" + std::string(1, c) + " escape");
          serialization::append_utf8(value, static_cast<uint32_t>(std::stoul(s_.substr(pos_ + 1, digits), nullptr, 16)));
          pos_ += digits;
          break;
        }
        case '\n': ++line_; break;  // a continued line
        default:
          if (c != '\\' && c != '\'' && c != '"') value += '\\';
          value += c;
      }
    }
    if (pos_ >= s_.size()) {
      line_ = line;
      fail("string without its closing quote");
    }
    ++pos_;
    tokens_.push_back({TokenKind::kString, value, line});
  }

  const std::string& s_;
  const std::string& name_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& name) { return Lexer(source, name).run(); }

}  // namespace megacpp::io::data::jinja
