// The training loop behind megacpp-train.
#pragma once

#include "settings/arguments.h"

namespace megacpp::training {

// Sets up the distributed runtime from the environment, builds and shards the model, trains
// for --train-iters iterations and logs Megatron-style lines. Returns the exit code; an error
// is printed as "PROGRAM: error: ..." before the process group is torn down.
int run_training(const settings::TrainingArguments& args, const char* program = "megacpp-train");

}  // namespace megacpp::training
