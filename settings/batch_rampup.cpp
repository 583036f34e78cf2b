#include "settings/batch_rampup.h"

#include <algorithm>
#include <stdexcept>

#include "megacpp/errors.h"

namespace megacpp::settings {

BatchRampup::BatchRampup(const TrainingArguments& args, int64_t global_batch, int64_t micro_step)
    : global_(global_batch), micro_step_(micro_step) {
  if (args.rampup_batch_size.empty()) return;
  start_ = args.rampup_batch_size[0];
  increment_ = args.rampup_batch_size[1];
  ramp_samples_ = args.rampup_batch_size[2];
  const std::string ramp = "--rampup-batch-size: " + std::to_string(start_) + " " + std::to_string(increment_) + " " +
                           std::to_string(ramp_samples_);
  require(start_ < global_,
          ramp + ": the start (" + std::to_string(start_) + ") must be below --global-batch-size (" + std::to_string(global_) + ")");
  require((global_ - start_) % increment_ == 0,
          ramp + ": the increment must divide --global-batch-size minus the start (" + std::to_string(global_ - start_) + ")");
  for (int64_t batch = start_; batch <= global_; batch += increment_) {
    require(batch % micro_step_ == 0, ramp + ": the batch of " + std::to_string(batch) +
                                      " samples is not a whole number of micro-batches x data-parallel size (" +
                                      std::to_string(micro_step_) + ")");
  }
  samples_per_increment_ = static_cast<double>(ramp_samples_) / static_cast<double>((global_ - start_) / increment_);
}

int64_t BatchRampup::batch_at(int64_t consumed) const {
  if (!ramps() || consumed > ramp_samples_) return global_;
  const auto steps = static_cast<int64_t>(static_cast<double>(consumed) / samples_per_increment_);
  return std::min(global_, start_ + steps * increment_);
}

// As Megatron's update_train_iters: iterate over the ramp (up to and including the batch that
// passes its end), then count whole global batches.
int64_t BatchRampup::iterations_for_samples(int64_t samples) const {
  int64_t iterations = 0, consumed = 0;
  while (ramps() && consumed <= ramp_samples_ && consumed <= samples) {
    consumed += batch_at(consumed);
    ++iterations;
  }
  const int64_t rest = samples - consumed;  // negative when the ramp's last batch went past `samples`
  return iterations + (rest >= 0 ? rest / global_ : -((-rest + global_ - 1) / global_));  // Python's floor division
}

int64_t BatchRampup::samples_for_iterations(int64_t iterations) const {
  int64_t consumed = 0, done = 0;
  for (; done < iterations && ramps() && consumed <= ramp_samples_; ++done) consumed += batch_at(consumed);
  return consumed + (iterations - done) * global_;
}

std::string BatchRampup::describe() const {
  return "batch size rampup from " + std::to_string(start_) + " to " + std::to_string(global_) + " samples, +" +
         std::to_string(increment_) + " every " + std::to_string(static_cast<int64_t>(samples_per_increment_)) +
         " samples, over " + std::to_string(ramp_samples_) + " samples";
}

}  // namespace megacpp::settings
