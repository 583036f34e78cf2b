// What megacpp-caption and megacpp-answer share: their main (model libraries loaded before the
// flags are read; argument errors exit 2, other failures 1) and the checkpoint they read.
#pragma once

#include <functional>

#include <cxxopts.hpp>

#include "checkpoint/checkpoint_reader.h"

namespace megacpp::launch {

// Parses `options` and runs `body`; prints "PROGRAM: error: ..." and returns 2 for
// std::invalid_argument (and bad flags), 1 for other exceptions; --help prints the flags.
int run_inference_tool(const char* program, cxxopts::Options options, int argc, char** argv,
                       const std::function<int(const cxxopts::ParseResult&)>& body);

// The checkpoint under --load: its --ckpt-step, else the latest. Throws naming --load when it
// holds none.
checkpoint::CheckpointReader open_checkpoint(const cxxopts::ParseResult& flags);

}  // namespace megacpp::launch
