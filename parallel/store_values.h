// Values in a c10d store, which holds bytes: text, and which of a set of keys are still absent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace megacpp::parallel {

inline std::vector<uint8_t> store_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }
inline std::string store_text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

// Indices of the `keys` not in `store` yet, to name who did not report after a wait timed out;
// empty when the store cannot tell (its connection broke with the wait).
inline std::vector<size_t> absent_keys(c10d::Store& store, const std::vector<std::string>& keys) {
  std::vector<size_t> absent;
  try {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!store.check({keys[i]})) absent.push_back(i);
    }
  } catch (const std::exception&) {
    return {};
  }
  return absent;
}

}  // namespace megacpp::parallel
