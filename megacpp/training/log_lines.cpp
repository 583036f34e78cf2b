#include "megacpp/training/log_lines.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace megacpp::training {

std::string iteration_line(const IterationStats& s) {
  char line[768];
  int n = std::snprintf(line, sizeof(line),
                        " iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per iteration (ms): %.1f | "
                        "learning rate: %.6E | global batch size: %5lld | lm loss: %.6E | grad norm: %.3f | "
                        "tokens per second: %.1f | tokens per second per rank: %.1f | TFLOP/s per rank: %.4f |",
                        static_cast<long long>(s.iteration), static_cast<long long>(s.train_iters),
                        static_cast<long long>(s.consumed_samples), s.ms_per_iteration, s.learning_rate,
                        static_cast<long long>(s.global_batch), s.loss, s.grad_norm, s.tokens_per_second,
                        s.tokens_per_second_per_rank, s.tflops_per_rank);
  if (s.mfu >= 0 && n > 0 && static_cast<size_t>(n) < sizeof(line)) {
    std::snprintf(line + n, sizeof(line) - static_cast<size_t>(n), " MFU: %.2f%% |", 100.0 * s.mfu);
  }
  return line;
}

std::string validation_block(const std::string& where, double loss) {
  char body[512];
  // Megatron caps the exponent so the perplexity of a diverged run still prints.
  std::snprintf(body, sizeof(body), " validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E | ", where.c_str(), loss,
                std::exp(std::min(20.0, loss)));
  const std::string rule(std::string(body).size() + 1, '-');
  return rule + "\n" + body + "\n" + rule;
}

}  // namespace megacpp::training
