// The rules megacpp-train's flags must keep together, checked once they are parsed.
#pragma once

#include "megacpp/arguments.h"

namespace megacpp {

// Throws std::invalid_argument naming the flag (or flags) at fault.
void validate_arguments(const TrainingArguments& args);

}  // namespace megacpp
