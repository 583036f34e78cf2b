// jinja2's filters and tests, Python's methods of str, list and dict, and the global functions
// transformers gives chat templates (raise_exception, strftime_now) beside jinja2's (range,
// namespace, dict): the ones Hugging Face's chat templates call.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/data/jinja/value.h"

namespace megacpp::io::data::jinja {

struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;

  // The argument at `position` or named `name`; `fallback` when neither is given.
  Value get(size_t position, const std::string& name, const Value& fallback) const;
};

// Each throws std::runtime_error for an unknown name or arguments it cannot take.
Value apply_filter(const std::string& name, const Value& value, const Arguments& args);
bool apply_test(const std::string& name, const Value& value, const Arguments& args);
Value call_method(const Value& object, const std::string& name, const Arguments& args);
// nullopt when `name` is no global function. raise_exception throws std::runtime_error with
// the template's message.
std::optional<Value> call_global(const std::string& name, const Arguments& args);

}  // namespace megacpp::io::data::jinja
