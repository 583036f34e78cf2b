// megacpp-train's command line: Megatron-style flags parsed, section by section (Note [Flag
// sections] in settings/flag_section.h), into one validated struct.
#pragma once

#include <string>

#include "settings/training_arguments.h"

namespace megacpp::settings {

// Parses argv (argv[0] is the program). Libraries named by --model-library are loaded first,
// so the families they register add their flags. The tokenizer is built once to size the model's
// vocabulary (Megatron's padded vocab), so a bad tokenizer file is reported here. Throws
// std::invalid_argument naming the flag for an unknown flag, a malformed value or an
// inconsistent combination (settings/argument_rules.h). `help` is set and usage printed to
// stdout for --help.
TrainingArguments parse_arguments(int argc, const char* const* argv, bool* help = nullptr);

}  // namespace megacpp::settings
