// What megacpp-answer, megacpp-caption and megacpp-convert share: their main. Model libraries
// are loaded before the flags are read (their families declare flags); argument errors exit 2,
// other failures 1.
#pragma once

#include <functional>

#include <cxxopts.hpp>

namespace megacpp::launch {

// Adds --model-library and -h/--help to `options`, parses argv and runs `body`; prints
// "PROGRAM: error: ..." and returns 2 for std::invalid_argument (and bad flags), 1 for other
// exceptions; --help prints the flags.
int run_tool(const char* program, cxxopts::Options options, int argc, char** argv,
             const std::function<int(const cxxopts::ParseResult&)>& body);

}  // namespace megacpp::launch
