// Logging set-up: rank 0 logs at info level, other ranks only warnings and errors.
#pragma once

#include <exception>
#include <string>

namespace megacpp {

void setup_logging(int rank);

// What a fatal error says: its message, as PyTorch prints it (libtorch's C++ backtrace only with
// TORCH_SHOW_CPP_STACKTRACES=1).
std::string error_message(const std::exception& error);

}  // namespace megacpp
