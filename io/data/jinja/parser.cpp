#include "io/data/jinja/parser.h"

#include <algorithm>
#include <stdexcept>

namespace megacpp::io::data::jinja {
namespace {

using Kind = Expr::Kind;

ExprPtr node(Kind kind, int line, std::string name = "") {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  e->name = std::move(name);
  return e;
}

ExprPtr with(ExprPtr e, ExprPtr operand) {
  e->operands.push_back(std::move(operand));
  return e;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : t_(tokens), name_(name) {}

  Body parse_template() {
    std::string ended;
    Body body = parse_body({}, ended);
    if (peek().kind != TokenKind::kEnd) fail("unexpected '" + peek().value + "'");
    return body;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(name_ + ":" + std::to_string(peek().line) + ": " + what);
  }
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool at(TokenKind kind, const std::string& value = "") const {
    return peek().kind == kind && (value.empty() || peek().value == value);
  }
  bool at_op(const std::string& op) const { return at(TokenKind::kOperator, op); }
  bool at_name(const std::string& name) const { return at(TokenKind::kName, name); }
  void expect(TokenKind kind, const std::string& value, const std::string& what) {
    if (!at(kind, value)) fail("expected " + what + ", got '" + peek().value + "'");
    ++i_;
  }
  void expect_op(const std::string& op) { expect(TokenKind::kOperator, op, "'" + op + "'"); }
  void expect_block_end() { expect(TokenKind::kBlockEnd, "", "%}"); }
  std::string expect_name() {
    if (!at(TokenKind::kName)) fail("expected a name, got '" + peek().value + "'");
    return next().value;
  }

  // Statements up to a block tag whose keyword is one of `ends` (consumed up to the keyword,
  // which goes to `ended`) or the end of the template.
  Body parse_body(const std::vector<std::string>& ends, std::string& ended) {
    Body body;
    while (!at(TokenKind::kEnd)) {
      const int line = peek().line;
      if (at(TokenKind::kText)) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->text = next().value;
        body.push_back(std::move(s));
        continue;
      }
      if (at(TokenKind::kVarBegin)) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = line;
        s->expr = expression();
        expect(TokenKind::kVarEnd, "", "}}");
        body.push_back(std::move(s));
        continue;
      }
      expect(TokenKind::kBlockBegin, "", "text, {{ or {%");
      const std::string keyword = expect_name();
      if (std::find(ends.begin(), ends.end(), keyword) != ends.end()) {
        ended = keyword;
        return body;
      }
      if (keyword == "generation") {  // transformers' AssistantTracker: the body as it is
        expect_block_end();
        std::string end;
        for (auto& s : parse_body({"endgeneration"}, end)) body.push_back(std::move(s));
        close(end, "endgeneration", line);
        continue;
      }
      body.push_back(statement(keyword, line));
    }
    if (!ends.empty()) fail("the template ends before {% " + ends.back() + " %}");
    return body;
  }

  void close(const std::string& ended, const std::string& expected, int opened) {
    if (ended != expected) fail("expected {% " + expected + " %} for the tag of line " + std::to_string(opened));
    expect_block_end();
  }

  StmtPtr statement(const std::string& keyword, int line) {
    auto s = std::make_unique<Stmt>();
    s->line = line;
    std::string ended;
    if (keyword == "if") {
      s->kind = Stmt::Kind::kIf;
      std::string branch = "if";
      while (branch == "if" || branch == "elif") {
        ExprPtr condition = expression();
        expect_block_end();
        s->branches.emplace_back(std::move(condition), parse_body({"elif", "else", "endif"}, branch));
      }
      if (branch == "else") {
        expect_block_end();
        s->else_body = parse_body({"endif"}, branch);
      }
      close(branch, "endif", line);
    } else if (keyword == "for") {
      s->kind = Stmt::Kind::kFor;
      s->targets.push_back(expect_name());
      while (at_op(",")) {
        ++i_;
        s->targets.push_back(expect_name());
      }
      expect(TokenKind::kName, "in", "'in'");
      s->expr = expression(/*ternary=*/false);
      if (at_name("if")) {
        ++i_;
        s->condition = expression(/*ternary=*/false);
      }
      if (at_name("recursive")) fail("recursive loops are not supported");
      expect_block_end();
      s->body = parse_body({"else", "endfor"}, ended);
      if (ended == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, ended);
      }
      close(ended, "endfor", line);
    } else if (keyword == "set") {
      set(*s, line);
    } else if (keyword == "macro") {
      macro(*s, line);
    } else if (keyword == "break" || keyword == "continue") {
      s->kind = keyword == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      expect_block_end();
    } else {
      --i_;
      fail("unknown or unsupported tag '" + keyword + "'");
    }
    return s;
  }

  void set(Stmt& s, int line) {
    std::string target = expect_name();
    if (at_op(".")) {
      ++i_;
      target += "." + expect_name();
    }
    s.targets.push_back(target);
    while (at_op(",")) {
      ++i_;
      s.targets.push_back(expect_name());
    }
    if (at(TokenKind::kBlockEnd) && s.targets.size() == 1 && target.find('.') == std::string::npos) {
      s.kind = Stmt::Kind::kSetBlock;
      expect_block_end();
      std::string ended;
      s.body = parse_body({"endset"}, ended);
      close(ended, "endset", line);
      return;
    }
    s.kind = Stmt::Kind::kSet;
    expect_op("=");
    s.expr = expression();
    if (at_op(",")) s.expr = tuple_rest(std::move(s.expr));
    expect_block_end();
  }

  void macro(Stmt& s, int line) {
    s.kind = Stmt::Kind::kMacro;
    s.name = expect_name();
    expect_op("(");
    while (!at_op(")")) {
      std::string param = expect_name();
      ExprPtr fallback;
      if (at_op("=")) {
        ++i_;
        fallback = expression();
      }
      s.params.emplace_back(param, std::move(fallback));
      if (!at_op(")")) expect_op(",");
    }
    ++i_;
    expect_block_end();
    std::string ended;
    s.body = parse_body({"endmacro"}, ended);
    close(ended, "endmacro", line);
  }

  ExprPtr tuple_rest(ExprPtr first) {
    auto tuple = node(Kind::kTuple, first->line);
    tuple->operands.push_back(std::move(first));
    while (at_op(",")) {
      ++i_;
      tuple->operands.push_back(expression());
    }
    return tuple;
  }

  // operands of a ternary: condition, then, else (null when left out: undefined).
  ExprPtr expression(bool ternary = true) {
    ExprPtr e = binary_or();
    if (!ternary || !at_name("if")) return e;
    auto t = node(Kind::kTernary, next().line);
    t->operands.push_back(binary_or());
    t->operands.push_back(std::move(e));
    if (at_name("else")) {
      ++i_;
      t->operands.push_back(expression());
    } else {
      t->operands.push_back(nullptr);
    }
    return t;
  }

  ExprPtr binary(ExprPtr left, const std::string& op, ExprPtr right) {
    auto b = node(Kind::kBinary, left->line, op);
    b->operands.push_back(std::move(left));
    b->operands.push_back(std::move(right));
    return b;
  }

  ExprPtr binary_or() {
    ExprPtr e = binary_and();
    while (at_name("or")) {
      ++i_;
      e = binary(std::move(e), "or", binary_and());
    }
    return e;
  }
  ExprPtr binary_and() {
    ExprPtr e = unary_not();
    while (at_name("and")) {
      ++i_;
      e = binary(std::move(e), "and", unary_not());
    }
    return e;
  }
  ExprPtr unary_not() {
    if (!at_name("not")) return compare();
    const int line = next().line;
    return with(node(Kind::kUnary, line, "not"), unary_not());
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    while (true) {
      if (at(TokenKind::kOperator) && (peek().value == "==" || peek().value == "!=" || peek().value == "<" || peek().value == ">" ||
                                       peek().value == "<=" || peek().value == ">=")) {
        const std::string op = next().value;
        e = binary(std::move(e), op, math1());
      } else if (at_name("in")) {
        ++i_;
        e = binary(std::move(e), "in", math1());
      } else if (at_name("not") && peek(1).kind == TokenKind::kName && peek(1).value == "in") {
        i_ += 2;
        e = binary(std::move(e), "not in", math1());
      } else {
        return e;
      }
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (at_op("+") || at_op("-")) {
      const std::string op = next().value;
      e = binary(std::move(e), op, concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (at_op("~")) {
      ++i_;
      e = binary(std::move(e), "~", math2());
    }
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = power();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const std::string op = next().value;
      e = binary(std::move(e), op, power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary();
    while (at_op("**")) {
      ++i_;
      e = binary(std::move(e), "**", unary());
    }
    return e;
  }
  // jinja2: the filters of "-x | f" apply to -x.
  ExprPtr unary(bool with_filters = true) {
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      const Token& op = next();
      e = with(node(Kind::kUnary, op.line, op.value), unary(false));
    } else {
      e = postfix(primary());
    }
    return with_filters ? filters(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    const Token& t = next();
    switch (t.kind) {
      case TokenKind::kString: {
        auto e = node(Kind::kLiteral, t.line);
        std::string text = t.value;
        while (at(TokenKind::kString)) text += next().value;  // adjacent literals join
        e->literal = text;
        return e;
      }
      case TokenKind::kInteger: {
        auto e = node(Kind::kLiteral, t.line);
        e->literal = std::stoll(t.value);
        return e;
      }
      case TokenKind::kFloat: {
        auto e = node(Kind::kLiteral, t.line);
        e->literal = std::stod(t.value);
        return e;
      }
      case TokenKind::kName: return name(t);
      case TokenKind::kOperator: return bracketed(t);
      default: --i_; fail("expected an expression, got '" + t.value + "'");
    }
  }

  ExprPtr name(const Token& t) {
    auto e = node(Kind::kLiteral, t.line);
    if (t.value == "true" || t.value == "True") {
      e->literal = true;
    } else if (t.value == "false" || t.value == "False") {
      e->literal = false;
    } else if (t.value == "none" || t.value == "None") {
      e->literal = nullptr;
    } else {
      e = node(Kind::kName, t.line, t.value);
    }
    return e;
  }

  ExprPtr bracketed(const Token& t) {
    if (t.value == "(") {
      if (at_op(")")) {
        ++i_;
        return node(Kind::kTuple, t.line);
      }
      ExprPtr e = expression();
      if (at_op(",")) e = tuple_rest(std::move(e));
      expect_op(")");
      return e;
    }
    if (t.value == "[" || t.value == "{") {
      const bool list = t.value == "[";
      auto e = node(list ? Kind::kList : Kind::kDict, t.line);
      const std::string close = list ? "]" : "}";
      while (!at_op(close)) {
        e->operands.push_back(expression());
        if (!list) {
          expect_op(":");
          e->operands.push_back(expression());
        }
        if (!at_op(close)) expect_op(",");
      }
      ++i_;
      return e;
    }
    --i_;
    fail("expected an expression, got '" + t.value + "'");
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (at_op(".")) {
        const int line = next().line;
        if (at(TokenKind::kInteger)) {
          auto index = node(Kind::kLiteral, line);
          index->literal = std::stoll(next().value);
          auto i = with(node(Kind::kIndex, line), std::move(e));
          e = with(std::move(i), std::move(index));
        } else {
          e = with(node(Kind::kAttr, line, expect_name()), std::move(e));
        }
      } else if (at_op("[")) {
        e = subscript(std::move(e));
      } else if (at_op("(")) {
        auto call = with(node(Kind::kCall, next().line), std::move(e));
        arguments(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr object) {
    const int line = next().line;
    ExprPtr parts[3];
    int part = 0;
    bool slice = false;
    while (!at_op("]")) {
      if (at_op(":")) {
        ++i_;
        slice = true;
        if (++part > 2) fail("a slice has at most three parts");
        continue;
      }
      parts[part] = expression();
    }
    ++i_;
    if (!slice) return with(with(node(Kind::kIndex, line), std::move(object)), std::move(parts[0]));
    auto e = with(node(Kind::kSlice, line), std::move(object));
    for (auto& p : parts) e->operands.push_back(std::move(p));
    return e;
  }

  // "(" consumed: positional and name=value arguments up to ")".
  void arguments(Expr& call) {
    while (!at_op(")")) {
      std::string keyword;
      if (at(TokenKind::kName) && peek(1).kind == TokenKind::kOperator && peek(1).value == "=") {
        keyword = next().value;
        ++i_;
      }
      call.operands.push_back(expression());
      call.keywords.push_back(keyword);
      if (!at_op(")")) expect_op(",");
    }
    ++i_;
  }

  ExprPtr filters(ExprPtr e) {
    while (true) {
      if (at_op("|")) {
        const int line = next().line;
        auto f = with(node(Kind::kFilter, line, expect_name()), std::move(e));
        if (at_op("(")) {
          ++i_;
          arguments(*f);
        }
        e = std::move(f);
      } else if (at_name("is")) {
        const int line = next().line;
        const bool negated = at_name("not");
        if (negated) ++i_;
        auto t = with(node(Kind::kTest, line, expect_name()), std::move(e));
        t->negated = negated;
        if (at_op("(")) {
          ++i_;
          arguments(*t);
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  const std::string& name_;
  size_t i_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& name) { return Parser(tokens, name).parse_template(); }

}  // namespace megacpp::io::data::jinja
