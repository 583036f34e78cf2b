// megacpp-train's whole program as a function, so a user's executable that links its own
// model families runs training exactly as megacpp-train does (every flag works).
#pragma once

namespace megacpp::launch {

// Parses the flags (loading --model-library first), trains, and returns the exit code: 0,
// or 1 after printing "PROGRAM: error: ..." to stderr.
int train_program(int argc, const char* const* argv, const char* program = "megacpp-train");

}  // namespace megacpp::launch
