#include "io/data/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "io/serialization/text_encoding.h"

namespace megacpp::io::data::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) { throw std::runtime_error(what); }

std::string type_name(const Value& v) {
  if (is_undefined(v)) return "undefined";
  if (v.is_null()) return "none";
  if (v.is_boolean()) return "bool";
  if (v.is_number_integer()) return "int";
  if (v.is_number()) return "float";
  if (v.is_string()) return "str";
  if (v.is_array()) return "list";
  return "dict";
}

// Python's repr of a float: the shortest digits that read back, positional for exponents in
// [-4, 16), else d.ddde+XX.
std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), x, std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  const size_t e = text.find('e');
  std::string mantissa = text.substr(0, e);
  const int exponent = std::stoi(text.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent + 1) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exponent + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exponent + 1)) + "." + digits.substr(static_cast<size_t>(exponent + 1));
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  }
  return (negative ? "-" : "") + out;
}

std::string number_str(const Value& v) {
  if (v.is_number_integer()) return v.is_number_unsigned() ? std::to_string(v.get<uint64_t>()) : std::to_string(v.get<int64_t>());
  return float_repr(v.get<double>());
}

void json_value(std::string& out, const Value& v, int indent, int depth) {
  const auto newline = [&](int level) {
    if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent * level), ' ');
  };
  if (v.is_array() || v.is_object()) {
    const bool array = v.is_array();
    out += array ? '[' : '{';
    if (v.empty()) {
      out += array ? ']' : '}';
      return;
    }
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += indent >= 0 ? "," : ", ";
      first = false;
      newline(depth + 1);
      if (!array) {
        serialization::append_json_string(out, it.key());
        out += ": ";
      }
      json_value(out, *it, indent, depth + 1);
    }
    newline(depth);
    out += array ? ']' : '}';
  } else if (v.is_string()) {
    serialization::append_json_string(out, v.get<std::string>());
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "true" : "false";
  } else if (v.is_number()) {
    out += v.is_number_float() && !std::isfinite(v.get<double>()) ? (std::isnan(v.get<double>()) ? "NaN" : v.get<double>() > 0 ? "Infinity" : "-Infinity")
                                                                   : number_str(v);
  } else {
    out += "null";
  }
}

// Byte offsets of a UTF-8 string's code points, plus its size.
std::vector<size_t> code_points(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  starts.push_back(s.size());
  return starts;
}

int compare(const Value& a, const Value& b, const std::string& op) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.get<std::string>().compare(b.get<std::string>());
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!equal(a[i], b[i])) return compare(a[i], b[i], op);
    }
    return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
  }
  type_error("'" + op + "' is not supported between " + type_name(a) + " and " + type_name(b));
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "+" && a.is_string() && b.is_string()) return a.get<std::string>() + b.get<std::string>();
  if (op == "+" && a.is_array() && b.is_array()) {
    Value out = a;
    for (const auto& x : b) out.push_back(x);
    return out;
  }
  if (op == "*" && a.is_string() && b.is_number_integer()) {
    std::string out;
    for (int64_t i = 0; i < b.get<int64_t>(); ++i) out += a.get<std::string>();
    return out;
  }
  if (!a.is_number() || !b.is_number() || a.is_boolean() != b.is_boolean()) {
    type_error("unsupported operand types for " + op + ": " + type_name(a) + " and " + type_name(b));
  }
  const bool integers = a.is_number_integer() && b.is_number_integer();
  const double x = a.get<double>(), y = b.get<double>();
  if ((op == "/" || op == "//" || op == "%") && y == 0) type_error("division by zero");
  if (op == "/") return x / y;
  if (op == "**") return integers && y >= 0 ? Value(static_cast<int64_t>(std::llround(std::pow(x, y)))) : Value(std::pow(x, y));
  if (integers) {
    const int64_t i = a.get<int64_t>(), j = b.get<int64_t>();
    if (op == "+") return i + j;
    if (op == "-") return i - j;
    if (op == "*") return i * j;
    const int64_t floor = i / j - ((i % j != 0) && ((i < 0) != (j < 0)) ? 1 : 0);
    return op == "//" ? floor : i - floor * j;
  }
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "//") return std::floor(x / y);
  return x - std::floor(x / y) * y;
}

}  // namespace

Value undefined() { return Value(Value::value_t::discarded); }
bool is_undefined(const Value& v) { return v.is_discarded(); }

bool truthy(const Value& v) {
  if (is_undefined(v) || v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get<std::string>().empty();
  return !v.empty();
}

std::string to_repr(const Value& v) {
  if (!v.is_string()) return to_str(v);
  const std::string s = v.get<std::string>();
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == '\\' || c == quote) out += '\\';
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string to_str(const Value& v) {
  if (is_undefined(v)) return "";
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number()) return number_str(v);
  if (v.is_string()) return v.get<std::string>();
  std::string out = v.is_array() ? "[" : "{";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    out += first ? "" : ", ";
    first = false;
    if (v.is_object()) out += to_repr(Value(it.key())) + ": ";
    out += to_repr(*it);
  }
  return out + (v.is_array() ? "]" : "}");
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  json_value(out, v, indent, 0);
  return out;
}

bool equal(const Value& a, const Value& b) {
  if (is_undefined(a) || is_undefined(b)) return is_undefined(a) && is_undefined(b);
  if (a.is_number() && b.is_number() && !a.is_boolean() && !b.is_boolean()) return a.get<double>() == b.get<double>();
  return a == b;
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "<") return compare(a, b, op) < 0;
  if (op == ">") return compare(a, b, op) > 0;
  if (op == "<=") return compare(a, b, op) <= 0;
  if (op == ">=") return compare(a, b, op) >= 0;
  if (op == "~") return to_str(a) + to_str(b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) type_error("'in <string>' needs a string on the left, not " + type_name(a));
      found = b.get<std::string>().find(a.get<std::string>()) != std::string::npos;
    } else if (b.is_array()) {
      for (const auto& x : b) found = found || equal(x, a);
    } else if (b.is_object()) {
      found = a.is_string() && b.contains(a.get<std::string>());
    } else {
      type_error("argument of type " + type_name(b) + " is not iterable");
    }
    return op == "in" ? found : !found;
  }
  return arithmetic(op, a, b);
}

Value attribute(const Value& object, const std::string& name) {
  if (is_undefined(object)) type_error("cannot take '" + name + "' of an undefined value");
  if (object.is_object()) {
    const auto it = object.find(name);
    return it == object.end() ? undefined() : *it;
  }
  return undefined();
}

Value item(const Value& object, const Value& index) {
  if (is_undefined(object)) type_error("cannot take an item of an undefined value");
  if (object.is_object()) return index.is_string() ? attribute(object, index.get<std::string>()) : undefined();
  if (!index.is_number_integer() || !(object.is_array() || object.is_string())) return undefined();
  const int64_t size = length(object);
  int64_t i = index.get<int64_t>();
  if (i < 0) i += size;
  if (i < 0 || i >= size) return undefined();
  if (object.is_array()) return object[static_cast<size_t>(i)];
  const auto starts = code_points(object.get<std::string>());
  return object.get<std::string>().substr(starts[static_cast<size_t>(i)], starts[static_cast<size_t>(i) + 1] - starts[static_cast<size_t>(i)]);
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (!object.is_array() && !object.is_string()) type_error("cannot slice " + type_name(object));
  const int64_t size = length(object);
  const int64_t by = step.is_null() ? 1 : step.get<int64_t>();
  if (by == 0) type_error("slice step cannot be zero");
  const auto bound = [&](const Value& v, int64_t fallback) {
    if (v.is_null()) return fallback;
    int64_t i = v.get<int64_t>();
    if (i < 0) i += size;
    return by > 0 ? std::clamp<int64_t>(i, 0, size) : std::clamp<int64_t>(i, -1, size - 1);
  };
  const int64_t from = bound(start, by > 0 ? 0 : size - 1), to = bound(stop, by > 0 ? size : -1);
  Value out = object.is_array() ? Value::array() : Value("");
  const std::vector<size_t> starts = object.is_string() ? code_points(object.get<std::string>()) : std::vector<size_t>{};
  for (int64_t i = from; by > 0 ? i < to : i > to; i += by) {
    if (object.is_array()) {
      out.push_back(object[static_cast<size_t>(i)]);
    } else {
      const auto u = static_cast<size_t>(i);
      out.get_ref<std::string&>() += object.get<std::string>().substr(starts[u], starts[u + 1] - starts[u]);
    }
  }
  return out;
}

int64_t length(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(code_points(v.get<std::string>()).size()) - 1;
  if (v.is_array() || v.is_object()) return static_cast<int64_t>(v.size());
  type_error("object of type " + type_name(v) + " has no len()");
}

Value iterable_items(const Value& v) {
  if (v.is_array()) return v;
  Value out = Value::array();
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) out.push_back(it.key());
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const auto starts = code_points(s);
    for (size_t i = 0; i + 1 < starts.size(); ++i) out.push_back(s.substr(starts[i], starts[i + 1] - starts[i]));
  } else if (!is_undefined(v) && !v.is_null()) {
    type_error("'" + type_name(v) + "' object is not iterable");
  }
  return out;
}

}  // namespace megacpp::io::data::jinja
