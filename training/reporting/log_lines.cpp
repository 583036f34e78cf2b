#include "training/reporting/log_lines.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace megacpp::training::reporting {

std::string iteration_line(const IterationStats& s) {
  char line[800];
  const std::string stamp = s.timestamp.empty() ? "" : " [" + s.timestamp + "]";
  std::snprintf(line, sizeof(line),
                "%s iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per iteration (ms): %.1f | "
                "learning rate: %.6E | global batch size: %5lld | lm loss: %.6E |",
                stamp.c_str(), static_cast<long long>(s.iteration), static_cast<long long>(s.train_iters),
                static_cast<long long>(s.consumed_samples), s.ms_per_iteration, s.learning_rate,
                static_cast<long long>(s.global_batch), s.loss);
  std::string text = line;
  for (const auto& [name, value] : s.auxiliary_losses) {  // Megatron's MoE losses follow lm loss
    std::snprintf(line, sizeof(line), " %s: %.6E |", name.c_str(), value);
    text += line;
  }
  std::snprintf(line, sizeof(line),
                " grad norm: %.3f | tokens per second: %.1f | tokens per second per rank: %.1f | TFLOP/s per rank: %.4f |",
                s.grad_norm, s.tokens_per_second, s.tokens_per_second_per_rank, s.tflops_per_rank);
  text += line;
  char extra[160];
  if (s.mfu >= 0) {
    std::snprintf(extra, sizeof(extra), " MFU: %.2f%% |", 100.0 * s.mfu);
    text += extra;
  }
  if (s.loss_scale >= 0) {  // Megatron's fields with --fp16
    std::snprintf(extra, sizeof(extra), " loss scale: %.1f | number of skipped iterations: %3lld |", s.loss_scale,
                  static_cast<long long>(std::max<int64_t>(s.skipped_iterations, 0)));
    text += extra;
  }
  return text;
}

std::string log_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

std::string arguments_block(const std::map<std::string, std::string>& flags) {
  std::string block = "------------------------ arguments ------------------------\n";
  for (const auto& [flag, value] : flags) {
    std::string name = flag;
    std::replace(name.begin(), name.end(), '-', '_');
    block += "  " + name + " " + std::string(name.size() < 48 ? 48 - name.size() : 1, '.') + " " + value + "\n";
  }
  return block + "-------------------- end of arguments ---------------------";
}

std::string summary_line(const RunSummary& s) {
  char head[256];
  std::snprintf(head, sizeof(head),
                " training done | iteration: %lld (this run: %lld) | tokens: %lld | time: %.1f s | tokens per second: %.1f |",
                static_cast<long long>(s.last_iteration), static_cast<long long>(s.iterations_run),
                static_cast<long long>(s.tokens), s.seconds, s.seconds > 0 ? static_cast<double>(s.tokens) / s.seconds : 0.0);
  std::string line = head;
  if (s.best_validation && s.last_validation) {
    char validation[160];
    std::snprintf(validation, sizeof(validation), " validation loss: best %.6E at iteration %lld, last %.6E |",
                  s.best_validation->second, static_cast<long long>(s.best_validation->first), *s.last_validation);
    line += validation;
  }
  return line + " checkpoint: " + (s.checkpoint.empty() ? "none" : s.checkpoint) + " |";
}

std::string validation_block(const std::string& where, double loss) {
  char body[512];
  // Megatron caps the exponent so the perplexity of a diverged run still prints.
  std::snprintf(body, sizeof(body), " validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E | ", where.c_str(), loss,
                std::exp(std::min(20.0, loss)));
  const std::string rule(std::string(body).size() + 1, '-');
  return rule + "\n" + body + "\n" + rule;
}

}  // namespace megacpp::training::reporting
