// Reading a model's config from JSON: a Hugging Face config.json, or a checkpoint's args.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace megacpp::models {

// Reads the keys of one JSON object; every error names where it came from (a file) and the key.
class ConfigKeys {
 public:
  ConfigKeys(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw std::invalid_argument(where_ + ": key '" + key + "': " + what);
  }
  // Present and not null.
  const nlohmann::json* get(const std::string& key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  // A missing key without a fallback is an error.
  int64_t positive(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    const nlohmann::json* v = get(key);
    if (!v && fallback) return *fallback;
    if (!v) fail(key, "missing");
    if (!v->is_number_integer() || v->get<int64_t>() <= 0) fail(key, "expected a positive integer, got " + v->dump());
    return v->get<int64_t>();
  }
  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    const nlohmann::json* v = get(key);
    if (!v && fallback) return *fallback;
    if (!v) fail(key, "missing");
    if (!v->is_number_integer()) fail(key, "expected an integer, got " + v->dump());
    return v->get<int64_t>();
  }
  std::string text(const std::string& key, std::optional<std::string> fallback = std::nullopt) const {
    const nlohmann::json* v = get(key);
    if (!v && fallback) return *fallback;
    if (!v) fail(key, "missing");
    if (!v->is_string()) fail(key, "expected a string, got " + v->dump());
    return v->get<std::string>();
  }
  double number(const std::string& key, std::optional<double> fallback = std::nullopt) const {
    const nlohmann::json* v = get(key);
    if (!v && fallback) return *fallback;
    if (!v) fail(key, "missing");
    if (!v->is_number()) fail(key, "expected a number, got " + v->dump());
    return v->get<double>();
  }
  bool flag(const std::string& key, std::optional<bool> fallback = std::nullopt) const {
    const nlohmann::json* v = get(key);
    if (!v && fallback) return *fallback;
    if (!v) fail(key, "missing");
    if (!v->is_boolean()) fail(key, "expected true or false, got " + v->dump());
    return v->get<bool>();
  }
  // The key must be absent, null or `allowed` (a feature megacpp does not implement).
  void refuse_unless(const std::string& key, const nlohmann::json& allowed, const std::string& why) const {
    const nlohmann::json* v = get(key);
    if (v && *v != allowed) fail(key, v->dump() + " is not supported: " + why);
  }

 private:
  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace megacpp::models
