// A parsed Jinja template: expressions and statements (io/data/jinja/parser.h makes them,
// io/data/jinja/template.h runs them).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace megacpp::io::data::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // operands: the items
    kTuple,    // operands: the items
    kDict,     // operands: key, value, key, value, ...
    kAttr,     // operands[0].name
    kIndex,    // operands[0][operands[1]]
    kSlice,    // operands[0][a:b:c]: operands 1..3, null where left out
    kCall,     // operands[0](operands[1..]); keywords[i] names operands[i + 1] ("" positional)
    kFilter,   // operands[0] | name(operands[1..]), keywords as kCall
    kTest,     // operands[0] is [not] name(operands[1..])
    kUnary,    // name operands[0]: "not", "-", "+"
    kBinary,   // operands[0] name operands[1]: or and == != < > <= >= in "not in" + - ~ * / // % **
    kTernary,  // operands[1] if operands[0] else operands[2] (null: undefined)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  std::string name;
  nlohmann::ordered_json literal;
  std::vector<ExprPtr> operands;
  std::vector<std::string> keywords;
  bool negated = false;  // a test's "is not"
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches, else_body
    kFor,       // for targets in expr [if condition]: body, else_body
    kSet,       // set targets = expr (target "ns.attr" sets a namespace's attribute)
    kSetBlock,  // set targets[0]: body captured as a string
    kMacro,     // macro name(params): body
    kBreak,
    kContinue,
  };
  Kind kind = Kind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // a macro's, with their defaults (null: none)
};

}  // namespace megacpp::io::data::jinja
