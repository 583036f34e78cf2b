#include "io/data/jinja/template.h"

#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "io/data/jinja/builtins.h"
#include "io/data/jinja/lexer.h"
#include "io/data/jinja/parser.h"

namespace megacpp::io::data::jinja {
namespace {

// An error already prefixed with the template's name and line.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const std::string& name, const Value& variables) : name_(name) {
    scopes_.emplace_back();
    for (auto it = variables.begin(); it != variables.end(); ++it) scopes_.back()[it.key()] = *it;
  }

  std::string run(const Body& body) {
    std::string out;
    exec(body, out);
    return out;
  }

 private:
  using Scope = std::map<std::string, Value>;

  Flow exec(const Body& body, std::string& out) {
    for (const auto& s : body) {
      const Flow flow = exec(*s, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& s, std::string& out) {
    try {
      return exec_statement(s, out);
    } catch (const RenderError&) {
      throw;
    } catch (const std::exception& e) {
      throw RenderError(name_ + ":" + std::to_string(line_ > 0 ? line_ : s.line) + ": " + e.what());
    }
  }

  Flow exec_statement(const Stmt& s, std::string& out) {
    line_ = s.line;
    switch (s.kind) {
      case Stmt::Kind::kText: out += s.text; return Flow::kNormal;
      case Stmt::Kind::kOutput: out += to_str(eval(*s.expr)); return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [condition, body] : s.branches) {
          if (truthy(eval(*condition))) return exec(body, out);
        }
        return exec(s.else_body, out);
      case Stmt::Kind::kFor: return exec_for(s, out);
      case Stmt::Kind::kSet: assign(s.targets, eval(*s.expr)); return Flow::kNormal;
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        exec(s.body, captured);
        assign(s.targets, captured);
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro: macros_[s.name] = &s; return Flow::kNormal;
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Stmt& s, std::string& out) {
    Value items = iterable_items(eval(*s.expr));
    if (s.condition) {  // jinja2 filters first: loop.* count the items that pass
      Value kept = Value::array();
      for (const auto& x : items) {
        scopes_.emplace_back();
        bind(s.targets, x);
        if (truthy(eval(*s.condition))) kept.push_back(x);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      scopes_.emplace_back();
      bind(s.targets, items[static_cast<size_t>(i)]);
      scopes_.back()["loop"] = Value{{"index", i + 1},          {"index0", i},         {"revindex", n - i},
                                     {"revindex0", n - i - 1}, {"first", i == 0},     {"last", i == n - 1},
                                     {"length", n},
                                     {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : undefined()},
                                     {"nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : undefined()}};
      const Flow flow = exec(s.body, out);
      scopes_.pop_back();
      if (flow == Flow::kBreak) break;
    }
    return n == 0 ? exec(s.else_body, out) : Flow::kNormal;
  }

  // A loop's targets in the new innermost scope: one name, or a tuple unpacked.
  void bind(const std::vector<std::string>& targets, const Value& value) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = value;
      return;
    }
    if (!value.is_array() || value.size() != targets.size()) {
      throw std::runtime_error("cannot unpack " + to_repr(value) + " into " + std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = value[i];
  }

  // set: a name in the innermost scope (a loop's does not outlive it, as in jinja2), or a
  // namespace's attribute where the namespace lives.
  void assign(const std::vector<std::string>& targets, const Value& value) {
    const size_t dot = targets[0].find('.');
    if (dot == std::string::npos) {
      bind(targets, value);
      return;
    }
    const std::string object = targets[0].substr(0, dot);
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      auto it = scope->find(object);
      if (it == scope->end()) continue;
      if (!it->second.is_object()) throw std::runtime_error("cannot set an attribute of " + to_repr(it->second));
      it->second[targets[0].substr(dot + 1)] = value;
      return;
    }
    throw std::runtime_error("'" + object + "' is undefined");
  }

  Value lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      if (auto it = scope->find(name); it != scope->end()) return it->second;
    }
    return undefined();
  }

  Arguments arguments(const Expr& call, size_t first) {
    Arguments a;
    for (size_t i = first; i < call.operands.size(); ++i) {
      Value v = eval(*call.operands[i]);
      const std::string& keyword = call.keywords.size() > i - first ? call.keywords[i - first] : std::string();
      if (keyword.empty()) {
        a.positional.push_back(std::move(v));
      } else {
        a.keywords.emplace_back(keyword, std::move(v));
      }
    }
    return a;
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.operands[0];
    const Arguments a = arguments(e, 1);
    if (callee.kind == Expr::Kind::kAttr) return call_method(eval(*callee.operands[0]), callee.name, a);
    if (callee.kind != Expr::Kind::kName) throw std::runtime_error("this expression is not callable");
    if (auto macro = macros_.find(callee.name); macro != macros_.end()) return call_macro(*macro->second, a);
    if (auto value = call_global(callee.name, a)) return *value;
    throw std::runtime_error("'" + callee.name + "' is not a function");
  }

  Value call_macro(const Stmt& macro, const Arguments& a) {
    Scope params;
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const auto& [param, fallback] = macro.params[i];
      Value given = a.get(i, param, undefined());
      params[param] = !is_undefined(given) ? given : fallback ? eval(*fallback) : undefined();
    }
    std::vector<Scope> caller = std::move(scopes_);
    scopes_ = {caller.front(), std::move(params)};
    std::string out;
    const int line = line_;
    exec(macro.body, out);
    scopes_ = std::move(caller);
    line_ = line;
    return out;
  }

  Value eval(const Expr& e) {
    using Kind = Expr::Kind;
    switch (e.kind) {
      case Kind::kLiteral: return e.literal;
      case Kind::kName: return lookup(e.name);
      case Kind::kList:
      case Kind::kTuple: {
        Value out = Value::array();
        for (const auto& x : e.operands) out.push_back(eval(*x));
        return out;
      }
      case Kind::kDict: {
        Value out = Value::object();
        for (size_t i = 0; i + 1 < e.operands.size(); i += 2) out[to_str(eval(*e.operands[i]))] = eval(*e.operands[i + 1]);
        return out;
      }
      case Kind::kAttr: return attribute(eval(*e.operands[0]), e.name);
      case Kind::kIndex: return item(eval(*e.operands[0]), eval(*e.operands[1]));
      case Kind::kSlice: {
        const auto part = [&](size_t i) { return e.operands[i] ? eval(*e.operands[i]) : Value(nullptr); };
        return slice(eval(*e.operands[0]), part(1), part(2), part(3));
      }
      case Kind::kCall: return call(e);
      case Kind::kFilter: return apply_filter(e.name, eval(*e.operands[0]), arguments(e, 1));
      case Kind::kTest: return apply_test(e.name, eval(*e.operands[0]), arguments(e, 1)) != e.negated;
      case Kind::kUnary: return unary(e.name, eval(*e.operands[0]));
      case Kind::kBinary: return binary(e);
      case Kind::kTernary:
        if (truthy(eval(*e.operands[0]))) return eval(*e.operands[1]);
        return e.operands[2] ? eval(*e.operands[2]) : undefined();
    }
    return undefined();
  }

  static Value unary(const std::string& op, const Value& v) {
    if (op == "not") return !truthy(v);
    if (!v.is_number() || v.is_boolean()) throw std::runtime_error("bad operand for unary " + op + ": " + to_repr(v));
    if (op == "+") return v;
    return v.is_number_integer() ? Value(-v.get<int64_t>()) : Value(-v.get<double>());
  }

  // Python's "and" / "or" give an operand, not a boolean.
  Value binary(const Expr& e) {
    Value left = eval(*e.operands[0]);
    if (e.name == "and") return truthy(left) ? eval(*e.operands[1]) : left;
    if (e.name == "or") return truthy(left) ? left : eval(*e.operands[1]);
    return binary_op(e.name, left, eval(*e.operands[1]));
  }

  const std::string& name_;
  std::vector<Scope> scopes_;
  std::map<std::string, const Stmt*> macros_;
  int line_ = 0;
};

}  // namespace

Template::Template(const std::string& source, std::string name) : name_(std::move(name)) {
  // jinja2 drops one newline at the end of a template (keep_trailing_newline=False).
  size_t end = source.size();
  if (end > 0 && source[end - 1] == '\n') end -= end > 1 && source[end - 2] == '\r' ? 2 : 1;
  body_ = parse(tokenize(source.substr(0, end), name_), name_);
}

std::string Template::render(const Value& variables) const {
  if (!variables.is_object()) throw std::runtime_error(name_ + ": the variables must be an object");
  return Renderer(name_, variables).run(body_);
}

}  // namespace megacpp::io::data::jinja
