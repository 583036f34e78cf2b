// The training loop behind megacpp-train.
#pragma once

#include "megacpp/arguments.h"

namespace megacpp::training {

// Sets up the distributed runtime from the environment, builds and shards the model, trains
// for --train-iters iterations and logs Megatron-style lines. Returns the exit code.
int run_training(const TrainingArguments& args);

}  // namespace megacpp::training
