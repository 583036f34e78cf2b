// The rules megacpp-train's flags must keep together, checked once they are parsed.
#pragma once

#include "settings/arguments.h"

namespace megacpp::settings {

// Throws std::invalid_argument naming the flag (or flags) at fault.
void validate_arguments(const TrainingArguments& args);

}  // namespace megacpp::settings
