// What a training run reports per iteration: Megatron's iteration line every --log-interval (and
// at the last and an exit iteration), TensorBoard points every --tensorboard-log-interval, the
// memory report after the first and the last iteration, and validation losses to TensorBoard.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "settings/arguments.h"
#include "io/metrics/tensorboard_writer.h"
#include "training/reporting/log_lines.h"
#include "models/language_model.h"

namespace megacpp::training::reporting {

struct RunShape {
  int world_size = 1, rank = 0;
  double flops_per_token = 0;
  c10::Device device = c10::Device(c10::kCPU);
};

struct IterationResult {
  int64_t iteration = 0, consumed_samples = 0;
  double learning_rate = 0, loss = 0, grad_norm = 0, ms = 0;
  bool exiting = false;  // the run stops after it (--exit-interval, --exit-duration-in-mins)
  double loss_scale = -1;  // after it, with a loss scaler (--fp16); < 0: none
  bool skipped = false;    // its gradients overflowed: no step (--fp16)
  int64_t global_batch = 0;  // its samples (--rampup-batch-size varies them)
  std::vector<models::AuxiliaryLoss> auxiliary_losses;  // the model's (load_balancing_loss), beside lm loss
};

class IterationLog {
 public:
  // TensorBoard events go to --tensorboard-dir on rank 0.
  IterationLog(const settings::TrainingArguments& args, RunShape shape);

  void iteration(const IterationResult& result, const std::vector<at::Tensor>& params, torch::optim::Optimizer& optimizer);
  // A validation (or test) loss at `step`, for TensorBoard.
  void validation(bool test, double loss, int64_t step);

 private:
  IterationStats throughput(double ms, double samples) const;  // per iteration
  void flush_tensorboard();

  const settings::TrainingArguments& args_;
  RunShape shape_;
  std::unique_ptr<io::metrics::TensorBoardWriter> tensorboard_;
  double interval_loss_ = 0, interval_ms_ = 0, interval_samples_ = 0;  // since the last line
  std::vector<std::pair<std::string, double>> interval_auxiliary_;       // sums, as interval_loss_
  int64_t interval_iters_ = 0, interval_skipped_ = 0;
};

}  // namespace megacpp::training::reporting
