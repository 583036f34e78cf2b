#include "settings/batch_plan.h"

#include <stdexcept>
#include <string>

#include "megacpp/checked_math.h"
#include "megacpp/errors.h"

namespace megacpp::settings {

BatchPlan plan_batches(const TrainingArguments& args, int data_parallel_size) {
  const int64_t accumulation = gradient_accumulation_steps(args, data_parallel_size);
  const int64_t micro_step = args.micro_batch_size * data_parallel_size;
  const int64_t global_batch = micro_step * accumulation;
  return {accumulation, global_batch, BatchRampup(args, global_batch, micro_step)};
}

int64_t gradient_accumulation_steps(const TrainingArguments& args, int data_parallel_size) {
  const int64_t per_step = checked_product(
      {{args.micro_batch_size, "--micro-batch-size"}, {data_parallel_size, "data-parallel size"}}, "the samples per micro-step");
  const int64_t global = args.global_batch_size > 0 ? args.global_batch_size : per_step;
  require(global % per_step == 0,
          "--global-batch-size (" + std::to_string(global) + ") must be divisible by --micro-batch-size (" +
              std::to_string(args.micro_batch_size) + ") x data-parallel size (" + std::to_string(data_parallel_size) + ")");
  return global / per_step;
}

int64_t train_iterations(const TrainingArguments& args, const BatchPlan& plan) {
  if (args.train_samples == 0) return args.train_iters;
  if (plan.rampup.ramps()) return plan.rampup.iterations_for_samples(args.train_samples);
  const int64_t iterations = args.train_samples / plan.global_batch;
  if (iterations == 0) {
    throw std::invalid_argument("--train-samples " + std::to_string(args.train_samples) + " is less than one global batch (" +
                                std::to_string(plan.global_batch) + " samples)");
  }
  return iterations;
}

}  // namespace megacpp::settings
