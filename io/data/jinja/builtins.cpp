#include "io/data/jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <stdexcept>

namespace megacpp::io::data::jinja {
namespace {

const char* const kWhitespace = " \t\n\r\f\v";

std::string text_of(const Value& v, const std::string& what) {
  if (!v.is_string()) throw std::runtime_error(what + " needs a string, got " + to_repr(v));
  return v.get<std::string>();
}

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::string set = chars.is_string() ? chars.get<std::string>() : kWhitespace;
  const size_t begin = left ? s.find_first_not_of(set) : 0;
  if (begin == std::string::npos) return "";
  const size_t end = right ? s.find_last_not_of(set) : s.size() - 1;
  return s.substr(begin, end - begin + 1);
}

Value split(const std::string& s, const Value& separator, int64_t max_splits) {
  Value out = Value::array();
  if (!separator.is_string()) {  // runs of whitespace, none at either end
    size_t i = s.find_first_not_of(kWhitespace);
    while (i != std::string::npos) {
      size_t end = s.find_first_of(kWhitespace, i);
      if (max_splits >= 0 && static_cast<int64_t>(out.size()) == max_splits) end = std::string::npos;
      out.push_back(s.substr(i, end == std::string::npos ? std::string::npos : end - i));
      i = end == std::string::npos ? end : s.find_first_not_of(kWhitespace, end);
    }
    return out;
  }
  const std::string sep = separator.get<std::string>();
  if (sep.empty()) throw std::runtime_error("split: empty separator");
  size_t from = 0;
  for (size_t at; (at = s.find(sep, from)) != std::string::npos;) {
    if (max_splits >= 0 && static_cast<int64_t>(out.size()) == max_splits) break;
    out.push_back(s.substr(from, at - from));
    from = at + sep.size();
  }
  out.push_back(s.substr(from));
  return out;
}

std::string replace(std::string s, const std::string& old, const std::string& with, int64_t count) {
  if (old.empty()) return s;
  size_t from = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    const size_t at = s.find(old, from);
    if (at == std::string::npos) break;
    s.replace(at, old.size(), with);
    from = at + with.size();
  }
  return s;
}

std::string map_chars(std::string s, int (*f)(int)) {
  for (char& c : s) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  return s;
}

std::string title(std::string s) {
  bool start = true;
  for (char& c : s) {
    const bool letter = std::isalpha(static_cast<unsigned char>(c)) != 0;
    c = static_cast<char>(letter && start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    start = !letter;
  }
  return s;
}

bool affix(const std::string& s, const Value& candidates, bool prefix) {
  const Value list = candidates.is_array() ? candidates : Value::array({candidates});
  for (const auto& c : list) {
    const std::string a = text_of(c, prefix ? "startswith" : "endswith");
    if (a.size() <= s.size() && s.compare(prefix ? 0 : s.size() - a.size(), a.size(), a) == 0) return true;
  }
  return false;
}

Value string_method(const std::string& s, const std::string& name, const Arguments& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return strip(s, a.get(0, "chars", nullptr), name != "rstrip", name != "lstrip");
  }
  if (name == "split") return split(s, a.get(0, "sep", nullptr), a.get(1, "maxsplit", -1).get<int64_t>());
  if (name == "startswith" || name == "endswith") return affix(s, a.get(0, "prefix", ""), name == "startswith");
  if (name == "upper") return map_chars(s, ::toupper);
  if (name == "lower") return map_chars(s, ::tolower);
  if (name == "title") return title(s);
  if (name == "capitalize") return s.empty() ? s : map_chars(s.substr(0, 1), ::toupper) + map_chars(s.substr(1), ::tolower);
  if (name == "replace") {
    return replace(s, text_of(a.get(0, "old", ""), "replace"), text_of(a.get(1, "new", ""), "replace"), a.get(2, "count", -1).get<int64_t>());
  }
  if (name == "find") {
    const size_t at = s.find(text_of(a.get(0, "sub", ""), "find"));
    return at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(at);
  }
  if (name == "join") {
    std::string out;
    const Value items = iterable_items(a.get(0, "iterable", Value::array()));
    for (size_t i = 0; i < items.size(); ++i) out += (i ? s : "") + text_of(items[i], "join");
    return out;
  }
  if (name == "splitlines") return split(replace(s, "\r\n", "\n", -1), "\n", -1);
  throw std::runtime_error("str has no method '" + name + "'");
}

Value items_of(const Value& dict) {
  Value out = Value::array();
  for (auto it = dict.begin(); it != dict.end(); ++it) out.push_back(Value::array({it.key(), *it}));
  return out;
}

std::string indent(const std::string& s, int64_t width, bool first, bool blank) {
  const std::string pad(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  std::string out;
  size_t line_start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i < s.size() && s[i] != '\n') continue;
    const std::string line = s.substr(line_start, i - line_start);
    const bool pads = (line_start == 0 ? first : true) && (blank || !line.empty());
    out += (pads ? pad : "") + line + (i < s.size() ? "\n" : "");
    line_start = i + 1;
  }
  return out;
}

// selectattr / rejectattr: the items whose attribute passes the test (truthiness without one).
Value select_by_attribute(const Value& items, const Arguments& a, bool keep) {
  const std::string attr = text_of(a.get(0, "attribute", ""), "selectattr");
  Arguments test_args;
  for (size_t i = 2; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  Value out = Value::array();
  for (const auto& x : iterable_items(items)) {
    const Value v = attribute(x, attr);
    const bool passes = a.positional.size() > 1 ? apply_test(text_of(a.positional[1], "selectattr"), v, test_args) : truthy(v);
    if (passes == keep) out.push_back(x);
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// jinja2's int and float filters: a number, or a string that reads as one.
std::optional<double> number_of(const Value& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const std::string s = strip(v.get<std::string>(), nullptr, true, true);
  try {
    size_t used = 0;
    const double x = std::stod(s, &used);
    if (used == s.size() && !s.empty()) return x;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

Value Arguments::get(size_t position, const std::string& name, const Value& fallback) const {
  for (const auto& [key, value] : keywords) {
    if (key == name) return value;
  }
  return position < positional.size() ? positional[position] : fallback;
}

Value apply_filter(const std::string& name, const Value& v, const Arguments& a) {
  if (name == "trim") return strip(text_of(Value(to_str(v)), name), a.get(0, "chars", nullptr), true, true);
  if (name == "tojson") {
    const Value indent_value = a.get(0, "indent", nullptr);
    return to_json(v, indent_value.is_number_integer() ? static_cast<int>(indent_value.get<int64_t>()) : -1);
  }
  if (name == "length" || name == "count") return length(v);
  if (name == "string") return to_str(v);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") return string_method(to_str(v), name, a);
  if (name == "replace") return string_method(to_str(v), name, a);
  if (name == "first" || name == "last") {
    const Value items = iterable_items(v);
    return items.empty() ? undefined() : name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    std::string out;
    const Value attr = a.get(1, "attribute", nullptr);
    const Value items = iterable_items(v);
    for (size_t i = 0; i < items.size(); ++i) {
      out += (i ? to_str(a.get(0, "d", "")) : "") + to_str(attr.is_string() ? attribute(items[i], attr.get<std::string>()) : items[i]);
    }
    return out;
  }
  if (name == "default" || name == "d") {
    const bool boolean = truthy(a.get(1, "boolean", false));
    return is_undefined(v) || (boolean && !truthy(v)) ? a.get(0, "default_value", "") : v;
  }
  if (name == "items") return v.is_object() ? items_of(v) : throw std::runtime_error("items needs a dict, got " + to_repr(v));
  if (name == "list") return iterable_items(v);
  if (name == "reverse") return slice(v.is_string() ? v : iterable_items(v), nullptr, nullptr, -1);
  if (name == "safe") return v;
  if (name == "e" || name == "escape") return html_escape(to_str(v));
  if (name == "int" || name == "float") {
    const std::optional<double> number = number_of(v);
    if (!number) return a.get(0, "default", name == "int" ? Value(0) : Value(0.0));
    if (name == "float") return *number;
    return v.is_number_integer() ? v : Value(static_cast<int64_t>(*number));
  }
  if (name == "abs") return v.is_number_integer() ? Value(std::llabs(v.get<int64_t>())) : Value(std::abs(v.get<double>()));
  if (name == "indent") {
    return indent(to_str(v), a.get(0, "width", 4).get<int64_t>(), truthy(a.get(1, "first", false)), truthy(a.get(2, "blank", false)));
  }
  if (name == "selectattr" || name == "rejectattr") return select_by_attribute(v, a, name == "selectattr");
  if (name == "map") {
    Value out = Value::array();
    const Value attr = a.get(99, "attribute", nullptr);
    for (const auto& x : iterable_items(v)) {
      if (attr.is_string()) {
        out.push_back(attribute(x, attr.get<std::string>()));
      } else {
        Arguments rest{{a.positional.begin() + (a.positional.empty() ? 0 : 1), a.positional.end()}, {}};
        out.push_back(apply_filter(text_of(a.get(0, "filter", ""), "map"), x, rest));
      }
    }
    return out;
  }
  if (name == "unique") {
    Value out = Value::array();
    for (const auto& x : iterable_items(v)) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equal(x, y); })) out.push_back(x);
    }
    return out;
  }
  if (name == "sum") {
    Value total = a.get(1, "start", 0);
    for (const auto& x : iterable_items(v)) total = binary_op("+", total, x);
    return total;
  }
  throw std::runtime_error("no filter named '" + name + "'");
}

bool apply_test(const std::string& name, const Value& v, const Arguments& a) {
  if (name == "defined") return !is_undefined(v);
  if (name == "undefined") return is_undefined(v);
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() && !v.is_boolean();
  if (name == "integer") return v.is_number_integer();
  if (name == "float") return v.is_number_float();
  if (name == "boolean") return v.is_boolean();
  if (name == "true" || name == "false") return v.is_boolean() && v.get<bool>() == (name == "true");
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return v.is_array() || v.is_object() || v.is_string();
  if (name == "sequence") return v.is_array() || v.is_string() || v.is_object();
  if (name == "callable") return false;
  if (name == "odd" || name == "even") return v.is_number_integer() && (v.get<int64_t>() % 2 != 0) == (name == "odd");
  if (name == "divisibleby") return v.get<int64_t>() % a.get(0, "num", 1).get<int64_t>() == 0;
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return equal(v, a.get(0, "other", nullptr));
  if (name == "ne" || name == "!=") return !equal(v, a.get(0, "other", nullptr));
  if (name == "in") return truthy(binary_op("in", v, a.get(0, "seq", Value::array())));
  if (name == "lower" || name == "upper") {
    const std::string s = to_str(v);
    return s == map_chars(s, name == "lower" ? ::tolower : ::toupper);
  }
  throw std::runtime_error("no test named '" + name + "'");
}

Value call_method(const Value& object, const std::string& name, const Arguments& a) {
  if (object.is_string()) return string_method(object.get<std::string>(), name, a);
  if (object.is_object()) {
    if (name == "items") return items_of(object);
    if (name == "keys") return iterable_items(object);
    if (name == "values") {
      Value out = Value::array();
      for (const auto& x : object) out.push_back(x);
      return out;
    }
    if (name == "get") {
      const Value found = attribute(object, text_of(a.get(0, "key", ""), "get"));
      return is_undefined(found) ? a.get(1, "default", nullptr) : found;
    }
  }
  throw std::runtime_error((is_undefined(object) ? std::string("undefined") : to_repr(object).substr(0, 40)) + " has no method '" +
                           name + "'");
}

std::optional<Value> call_global(const std::string& name, const Arguments& a) {
  if (name == "range") {
    const bool one = a.positional.size() == 1;
    const int64_t start = one ? 0 : a.get(0, "start", 0).get<int64_t>();
    const int64_t stop = one ? a.positional[0].get<int64_t>() : a.get(1, "stop", 0).get<int64_t>();
    const int64_t step = a.get(2, "step", 1).get<int64_t>();
    if (step == 0) throw std::runtime_error("range() step must not be zero");
    Value out = Value::array();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(i);
    return out;
  }
  if (name == "namespace" || name == "dict") {
    Value out = Value::object();
    for (const auto& x : a.positional) {
      if (x.is_object()) out.update(x);
    }
    for (const auto& [key, value] : a.keywords) out[key] = value;
    return out;
  }
  if (name == "raise_exception") throw std::runtime_error("raise_exception: " + to_str(a.get(0, "message", "")));
  if (name == "strftime_now") {
    const std::time_t now = std::time(nullptr);
    char buffer[256];
    std::tm local{};
    localtime_r(&now, &local);
    const size_t n = std::strftime(buffer, sizeof(buffer), text_of(a.get(0, "format", ""), "strftime_now").c_str(), &local);
    return std::string(buffer, n);
  }
  return std::nullopt;
}

}  // namespace megacpp::io::data::jinja
