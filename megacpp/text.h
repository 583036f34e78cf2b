// Small text helpers every layer may use.
#pragma once

#include <string>

namespace megacpp {

// `text` without the spaces, tabs and line ends around it.
inline std::string trimmed(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

}  // namespace megacpp
