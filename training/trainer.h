// The training loop behind megacpp-train.
#pragma once

#include "settings/job_config.h"

namespace megacpp::training {

// Starts the distributed runtime of a resolved job (runtime::resolve_job with
// JobLayout::training()), builds and shards the model, trains for --train-iters iterations and
// logs Megatron-style lines. Returns the exit code; an error is printed as "PROGRAM: error: ..."
// before the process group is torn down.
int run_training(const settings::JobConfig& job, const char* program = "megacpp-train");

}  // namespace megacpp::training
