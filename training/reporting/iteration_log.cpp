#include "training/reporting/iteration_log.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "training/reporting/memory_report.h"

namespace megacpp::training::reporting {

IterationLog::IterationLog(const settings::TrainingArguments& args, RunShape shape) : args_(args), shape_(shape) {
  if (!args.tensorboard_dir.empty() && shape.rank == 0) {
    tensorboard_ = std::make_unique<io::metrics::TensorBoardWriter>(args.tensorboard_dir);
    spdlog::info("tensorboard: writing {}", tensorboard_->path());
  }
}

IterationStats IterationLog::throughput(double ms, double samples) const {
  IterationStats stats;
  stats.ms_per_iteration = ms;
  stats.tokens_per_second = samples * static_cast<double>(args_.seq_length) / (ms / 1000.0);
  stats.tokens_per_second_per_rank = stats.tokens_per_second / shape_.world_size;
  stats.tflops_per_rank = stats.tokens_per_second_per_rank * shape_.flops_per_token / 1e12;
  stats.mfu = args_.peak_tflops > 0 ? stats.tflops_per_rank / args_.peak_tflops : -1;
  return stats;
}

void IterationLog::iteration(const IterationResult& r, const std::vector<at::Tensor>& params, torch::optim::Optimizer& optimizer) {
  const int64_t it = r.iteration;
  if (tensorboard_ && it % args_.tensorboard_log_interval == 0) {
    const IterationStats stats = throughput(r.ms, static_cast<double>(r.global_batch));
    tensorboard_->add_scalar("lm loss", r.loss, it);
    for (const auto& a : r.auxiliary_losses) tensorboard_->add_scalar(a.name, a.value, it);
    tensorboard_->add_scalar("learning-rate", r.learning_rate, it);
    if (!r.skipped) tensorboard_->add_scalar("grad-norm", r.grad_norm, it);
    if (r.loss_scale >= 0) tensorboard_->add_scalar("loss-scale", r.loss_scale, it);
    tensorboard_->add_scalar("throughput/tokens-per-second", stats.tokens_per_second, it);
    tensorboard_->add_scalar("throughput/tflops-per-rank", stats.tflops_per_rank, it);
    const MemoryReport memory = measure_memory(params, optimizer, shape_.device);
    tensorboard_->add_scalar("memory/peak-mb", memory.peak_mb, it);
    tensorboard_->add_scalar("memory/state-mb", memory.sharded_params_mb + memory.sharded_grads_mb + memory.optimizer_state_mb, it);
  }
  // As Megatron: the line's loss averages the iterations that took their step.
  if (interval_auxiliary_.empty()) {
    for (const auto& a : r.auxiliary_losses) interval_auxiliary_.emplace_back(a.name, 0.0);
  }
  if (!r.skipped) {
    interval_loss_ += r.loss;
    for (size_t i = 0; i < r.auxiliary_losses.size(); ++i) interval_auxiliary_[i].second += r.auxiliary_losses[i].value;
  }
  interval_ms_ += r.ms;
  interval_samples_ += static_cast<double>(r.global_batch);
  ++interval_iters_;
  interval_skipped_ += r.skipped ? 1 : 0;
  if (it % args_.log_interval == 0 || it == args_.train_iters || r.exiting) {
    IterationStats stats = throughput(interval_ms_ / interval_iters_, interval_samples_ / interval_iters_);
    stats.timestamp = log_timestamp();
    stats.iteration = it;
    stats.train_iters = args_.train_iters;
    stats.consumed_samples = r.consumed_samples;
    stats.global_batch = r.global_batch;
    stats.learning_rate = r.learning_rate;
    const int64_t stepped = interval_iters_ - interval_skipped_;
    stats.loss = stepped > 0 ? interval_loss_ / stepped : r.loss;
    for (size_t i = 0; i < interval_auxiliary_.size(); ++i) {
      stats.auxiliary_losses.emplace_back(interval_auxiliary_[i].first,
                                          stepped > 0 ? interval_auxiliary_[i].second / stepped : r.auxiliary_losses[i].value);
    }
    stats.grad_norm = r.grad_norm;
    stats.loss_scale = r.loss_scale;
    stats.skipped_iterations = r.loss_scale >= 0 ? interval_skipped_ : -1;
    spdlog::info(iteration_line(stats));
    if (tensorboard_) flush_tensorboard();
    interval_loss_ = interval_ms_ = interval_samples_ = 0;
    interval_auxiliary_.clear();
    interval_iters_ = interval_skipped_ = 0;
  }
  // After the first iteration (as Megatron) and again after the last, whose peak is the run's.
  if (it == 1 || it == args_.train_iters || r.exiting) {
    std::printf("%s\n", measure_memory(params, optimizer, shape_.device).format(shape_.rank, it).c_str());
    std::fflush(stdout);
  }
}

void IterationLog::validation(bool test, double loss, int64_t step) {
  if (!tensorboard_) return;
  const std::string tag = test ? "lm loss test" : "lm loss validation";
  tensorboard_->add_scalar(tag, loss, step);
  tensorboard_->add_scalar(tag + " ppl", std::exp(std::min(20.0, loss)), step);
  flush_tensorboard();
}

// Metrics are not worth a training run: a failed write (say, a full disk) stops TensorBoard.
void IterationLog::flush_tensorboard() {
  try {
    tensorboard_->flush();
  } catch (const std::exception& e) {
    spdlog::warn("tensorboard: {}; no more events are written", e.what());
    tensorboard_.reset();
  }
}

}  // namespace megacpp::training::reporting
