// megacpp-preprocess's flags (Megatron-LM's tools/preprocess_data.py, MindSpeed-LLM's
// instruction handlers, image packing): declared, read and checked here, torch-free, so that
// its main only runs the job.
#pragma once

#include <cxxopts.hpp>

#include "io/data/image_pack.h"
#include "io/data/instruction_data.h"
#include "io/data/preprocess.h"

namespace megacpp::launch {

// What to do: tokenize text, with an instruction --handler-name tokenize conversations (Note
// [Instruction data]), or with --pack-images pack the images of image-text JSON lines.
struct PreprocessJob {
  enum class Kind { kText, kInstructions, kImages } kind = Kind::kText;
  io::data::PreprocessOptions text;
  io::data::InstructionOptions conversations;
  io::data::ImagePackOptions images;
};

cxxopts::Options preprocess_options();

// The job argv asks for; sets `*help` (and returns no job) for --help. Throws
// std::invalid_argument naming the flag at fault: a malformed or missing value, a flag the job
// does not read, a tokenizer that cannot be built.
PreprocessJob read_preprocess_job(int argc, char** argv, bool* help);

}  // namespace megacpp::launch
