// Jinja's values as Python's: a template's variables are JSON (ordered, as Python's dicts keep
// their keys), undefined is a value of its own, and printing, comparing, arithmetic and
// subscripts follow Python's rules, as jinja2 (transformers' renderer) computes them. Tuples
// are lists (printed as [..], which no chat template prints).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace megacpp::io::data::jinja {

using Value = nlohmann::ordered_json;

// jinja2's Undefined: a name or key that does not exist. It prints as "", is false, and is
// an error to take an attribute of.
Value undefined();
bool is_undefined(const Value& v);

bool truthy(const Value& v);
// Python's str() (None, True, 1.5, ['a', 1], {'k': 'v'}); undefined prints as "".
std::string to_str(const Value& v);
// Python's repr() of one value (strings quoted as Python quotes them).
std::string to_repr(const Value& v);
// Python's json.dumps(v, ensure_ascii=False, indent=indent): transformers' tojson filter
// (indent < 0: none, separators ", " and ": ").
std::string to_json(const Value& v, int indent);

// The operators of Expr::Kind::kBinary but "and" and "or": == != < > <= >= in, "not in",
// + - * / // % ** and ~. Throws std::runtime_error for operands Python refuses.
Value binary_op(const std::string& op, const Value& a, const Value& b);
bool equal(const Value& a, const Value& b);

// a.name (a dict's key), a[index] (a list's or string's item, negative from the end; a dict's
// key) and a[start:stop:step] (null parts left out); undefined where there is none. Throws
// std::runtime_error for an attribute of undefined.
Value attribute(const Value& object, const std::string& name);
Value item(const Value& object, const Value& index);
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);

// Python's len() of a string (code points), list or dict; throws for others.
int64_t length(const Value& v);
// The items a for loop walks: a list's, a dict's keys, a string's characters.
Value iterable_items(const Value& v);

}  // namespace megacpp::io::data::jinja
