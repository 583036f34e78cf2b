// Note [Flag sections]
// megacpp-train's flags come in sections, as torchtitan's JobConfig does: model, training, LoRA,
// data, evaluation, parallel, checkpointing, logging. Each section is one file,
// settings/<name>_section.cpp, that declares its flags (name, help, default: its --help group),
// reads them into TrainingArguments and checks each of them and the ones that go together in
// it. What is left for other files: the rules between sections (argument_rules.cpp), the flags
// the FSDP2 YAML also sets, merged with it once (fsdp2_config_from_args.cpp), and the sizes of
// the mesh (parallelism.cpp: --context-parallel-size with the YAML's ulysses_size).
#pragma once

#include <array>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "models/model_flags.h"
#include "settings/training_arguments.h"

namespace megacpp::settings {

struct FlagSection {
  const char* name;                                     // as --help groups it
  void (*declare)(cxxopts::Options& options);           // adds its flags
  void (*read)(TrainingArguments& args, const cxxopts::ParseResult& flags);  // reads and checks them
};

// The sections, in the order --help lists them and parse_arguments reads them (a section may
// use what the ones before it read).
const std::vector<FlagSection>& flag_sections();

// A number flag's value, read from its text so that a malformed value names the flag.
template <class T>
T flag_number(const cxxopts::ParseResult& flags, const std::string& flag) {
  return models::parse_flag_number<T>(flag, flags[flag].as<std::string>());
}

// The space-separated words of a multi-word flag's value (--data-path, --rampup-batch-size).
std::vector<std::string> split_words(const std::string& text);
// The items of a list flag written with commas, spaces or both (--lora-target-modules).
std::vector<std::string> split_list(std::string text);

// --image-mean / --image-std: "a,b,c" (commas or spaces), one number per image channel, or one
// for every channel. Throws std::invalid_argument naming the flag.
std::array<double, 3> parse_channel_values(const std::string& flag, const std::string& text);

// The sections' own (settings/*_section.cpp).
FlagSection model_section();
FlagSection training_section();
FlagSection lora_section();
FlagSection data_section();
FlagSection evaluation_section();
FlagSection parallel_section();
FlagSection checkpoint_section();
FlagSection logging_section();

}  // namespace megacpp::settings
