// What megacpp-grpo reports, on rank 0: each step's line every --log-interval steps (and the
// last), the held-out evaluation's line, and with --tensorboard-dir each step's figures as
// TensorBoard scalars every --tensorboard-log-interval steps (ROLL's tracker with track_with:
// tensorboard; the evaluation's at every evaluation), named as megacpp-train names its own
// ("learning-rate", ...).
#pragma once

#include <cstdint>
#include <memory>

#include "io/metrics/tensorboard_writer.h"
#include "rl/grpo_step.h"
#include "settings/arguments.h"

namespace megacpp::rl {

class GrpoLog {
 public:
  // `writes`: this is rank 0. `masked`: responses may be left out (the line shows how many count).
  GrpoLog(const settings::TrainingArguments& args, bool writes, bool masked);

  // Step `step` (1-based) of --train-iters.
  void step(int64_t step, const GrpoStepStats& stats, double learning_rate, double seconds);
  // The held-out exact-answer reward at `step`: `correct` of `prompts` answered.
  void evaluation(int64_t step, double correct, double prompts);

 private:
  const settings::TrainingArguments& args_;
  bool writes_, masked_;
  std::unique_ptr<io::metrics::TensorBoardWriter> tensorboard_;
};

}  // namespace megacpp::rl
