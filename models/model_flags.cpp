#include "models/model_flags.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace megacpp::models {

template <class T>
T parse_flag_number(const std::string& flag, const std::string& text) {
  size_t used = 0;
  T value{};
  try {
    if constexpr (std::is_floating_point_v<T>) {
      value = static_cast<T>(std::stod(text, &used));
    } else if constexpr (std::is_unsigned_v<T>) {
      if (!text.empty() && text[0] == '-') throw std::invalid_argument("negative");
      value = static_cast<T>(std::stoull(text, &used));
    } else {
      const long long wide = std::stoll(text, &used);
      if (wide < std::numeric_limits<T>::min() || wide > std::numeric_limits<T>::max()) used = 0;
      value = static_cast<T>(wide);
    }
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw std::invalid_argument("--" + flag + ": '" + text + "' is not a valid " +
                                (std::is_floating_point_v<T> ? "number" : "integer"));
  }
  if constexpr (std::is_floating_point_v<T>) {
    // std::stod reads "nan" and "inf"; no flag of a training run means either.
    if (!std::isfinite(value)) throw std::invalid_argument("--" + flag + ": '" + text + "' is not a finite number");
  }
  return value;
}

template int parse_flag_number<int>(const std::string&, const std::string&);
template int64_t parse_flag_number<int64_t>(const std::string&, const std::string&);
template uint64_t parse_flag_number<uint64_t>(const std::string&, const std::string&);
template double parse_flag_number<double>(const std::string&, const std::string&);

const std::string& ModelFlagValues::text(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) throw std::out_of_range("model flag --" + flag + " was not declared by the model family");
  return it->second;
}

}  // namespace megacpp::models
