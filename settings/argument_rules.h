// The rules between megacpp-train's flag sections (Note [Flag sections] in
// settings/flag_section.h: each section checks its own flags), checked once all are read.
#pragma once

#include "settings/training_arguments.h"

namespace megacpp::settings {

// Throws std::invalid_argument naming the flags at fault.
void validate_arguments(const TrainingArguments& args);

}  // namespace megacpp::settings
