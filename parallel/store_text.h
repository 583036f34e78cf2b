// Text values in a c10d store, which holds bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace megacpp::parallel {

inline std::vector<uint8_t> store_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }
inline std::string store_text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace megacpp::parallel
