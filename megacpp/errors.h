// The two helpers every layer's error paths use: a precondition that throws the message a user
// reads, and the text of the last system error.
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace megacpp {

// Throws std::invalid_argument(message) unless `ok`: the refusal of a bad flag, key or size.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

// strerror(errno), to append to "cannot open 'FILE': ".
inline std::string errno_text() { return std::strerror(errno); }

}  // namespace megacpp
