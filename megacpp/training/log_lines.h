// Megatron-style log lines, in one place so their format (which users grep and tests parse)
// is easy to keep stable.
#pragma once

#include <cstdint>
#include <string>

namespace megacpp::training {

struct IterationStats {
  int64_t iteration = 0, train_iters = 0, consumed_samples = 0, global_batch = 0;
  double ms_per_iteration = 0, learning_rate = 0, loss = 0, grad_norm = 0;
  double tokens_per_second = 0;           // all ranks together
  double tokens_per_second_per_rank = 0;
  double tflops_per_rank = 0;
  double mfu = -1;                        // fraction of --peak-tflops; < 0: no peak known
};

std::string iteration_line(const IterationStats& stats);

// Megatron's framed block: "validation loss at iteration N | lm loss value: X | lm loss PPL: P |".
// `where` is e.g. "iteration 100" or "the end of training for val data".
std::string validation_block(const std::string& where, double loss);

}  // namespace megacpp::training
