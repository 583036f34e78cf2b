#include "settings/flag_section.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace megacpp::settings {

const std::vector<FlagSection>& flag_sections() {
  static const std::vector<FlagSection> sections = {model_section(),      training_section(), lora_section(),
                                                    data_section(),       evaluation_section(), parallel_section(),
                                                    checkpoint_section(), logging_section()};
  return sections;
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> words;
  for (std::string w; stream >> w;) words.push_back(w);
  return words;
}

std::vector<std::string> split_list(std::string text) {
  std::replace(text.begin(), text.end(), ',', ' ');
  return split_words(text);
}

std::array<double, 3> parse_channel_values(const std::string& flag, const std::string& text) {
  const std::vector<std::string> words = split_list(text);
  if (words.size() != 1 && words.size() != 3) {
    throw std::invalid_argument("--" + flag + " '" + text + "': expected 3 numbers (one per channel) or 1");
  }
  std::array<double, 3> out{};
  for (size_t i = 0; i < 3; ++i) out[i] = models::parse_flag_number<double>(flag, words[words.size() == 1 ? 0 : i]);
  return out;
}

}  // namespace megacpp::settings
