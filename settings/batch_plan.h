// megacpp-train's batches, resolved with the job (Note [Job configuration] in
// settings/job_config.h) once the data-parallel size is known: the micro-batches accumulated per
// iteration, the global batch, Megatron's --rampup-batch-size and the iterations of
// --train-samples.
#pragma once

#include <cstdint>

#include "settings/batch_rampup.h"
#include "settings/training_arguments.h"

namespace megacpp::settings {

struct BatchPlan {
  int64_t accumulation;  // micro-batches per iteration of the global batch (validation's)
  int64_t global_batch;  // --global-batch-size, or micro batch x data-parallel size
  BatchRampup rampup;    // each training iteration's global batch (the global batch without a ramp)
};

// Throws std::invalid_argument naming the flags whose batches are not whole micro-steps.
BatchPlan plan_batches(const TrainingArguments& args, int data_parallel_size);

// Checks the batch arithmetic against the data-parallel size. Returns the number of
// micro-batches accumulated per iteration.
int64_t gradient_accumulation_steps(const TrainingArguments& args, int data_parallel_size);

// Megatron's train_iters: --train-iters, or for --train-samples the iterations of the ramp, then
// whole global batches.
int64_t train_iterations(const TrainingArguments& args, const BatchPlan& plan);

}  // namespace megacpp::settings
