// The checkpoint a tool reads (megacpp-answer, -caption, -convert export): --load and
// --ckpt-step, declared and read in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <cxxopts.hpp>

#include "checkpoint/checkpoint_reader.h"

namespace megacpp::launch {

// --load ROOT (`what`: what the checkpoint is for, in its help) and --ckpt-step N.
void add_load_flags(cxxopts::Options& options, const std::string& group, const std::string& what);

// --ckpt-step, or nullopt for the latest. Throws std::invalid_argument naming the flag.
std::optional<int64_t> checkpoint_step(const cxxopts::ParseResult& flags);

// The checkpoint under --load: its --ckpt-step, else the latest. Throws naming --load when it
// is not given or holds none.
checkpoint::CheckpointReader open_checkpoint(const cxxopts::ParseResult& flags);

}  // namespace megacpp::launch
