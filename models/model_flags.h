// Model flags: each model family declares the Megatron-style flags it reads; megacpp-train
// parses them with the rest and hands the family their values.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace megacpp::models {

// One flag a family reads, named as on the command line without "--".
struct ModelFlag {
  std::string name;
  std::string help;
  std::string default_value;  // ignored for a switch (default off)
  bool is_switch = false;
};

// The text of a flag's value converted to a number; throws std::invalid_argument
// "--FLAG: 'TEXT' is not a valid integer|number" for malformed or out-of-range text.
template <class T>
T parse_flag_number(const std::string& flag, const std::string& text);

// The parsed values of a family's flags (switches read "true" / "false").
class ModelFlagValues {
 public:
  // `given`: the flags given on the command line (the others hold their defaults).
  explicit ModelFlagValues(std::map<std::string, std::string> values, std::set<std::string> given = {})
      : values_(std::move(values)), given_(std::move(given)) {}

  int64_t integer(const std::string& flag) const { return parse_flag_number<int64_t>(flag, text(flag)); }
  double number(const std::string& flag) const { return parse_flag_number<double>(flag, text(flag)); }
  bool enabled(const std::string& flag) const { return text(flag) == "true"; }
  // Throws std::out_of_range when the family did not declare `flag` (a bug in the family).
  const std::string& text(const std::string& flag) const;
  // Whether `flag` was given rather than left at its default (a family that passes flags on to
  // another family, as LLaVA to its language model, gives that one its own defaults).
  bool given(const std::string& flag) const { return given_.count(flag) > 0; }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> given_;
};

}  // namespace megacpp::models
