// Batch, sample and iteration arithmetic on flag values that must not wrap around: an int64
// product or sum that overflows is an error naming the values (and so the flags) it came from.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

namespace megacpp {

// A value and where it came from, e.g. {args.micro_batch_size, "--micro-batch-size"}.
using NamedValue = std::pair<int64_t, std::string>;

namespace detail {
inline std::string describe(std::initializer_list<NamedValue> values, const char* op) {
  std::string text;
  for (const auto& [value, name] : values) text += (text.empty() ? "" : op) + name + " (" + std::to_string(value) + ")";
  return text;
}
}  // namespace detail

// The product of `factors`; throws std::invalid_argument naming them and `what` on overflow.
inline int64_t checked_product(std::initializer_list<NamedValue> factors, const std::string& what) {
  int64_t result = 1;
  for (const auto& factor : factors) {
    if (__builtin_mul_overflow(result, factor.first, &result)) {
      throw std::invalid_argument(detail::describe(factors, " x ") + ": " + what + " overflows a 64-bit integer");
    }
  }
  return result;
}

// The sum of `terms`; throws std::invalid_argument naming them and `what` on overflow.
inline int64_t checked_sum(std::initializer_list<NamedValue> terms, const std::string& what) {
  int64_t result = 0;
  for (const auto& term : terms) {
    if (__builtin_add_overflow(result, term.first, &result)) {
      throw std::invalid_argument(detail::describe(terms, " + ") + ": " + what + " overflows a 64-bit integer");
    }
  }
  return result;
}

}  // namespace megacpp
