// Megatron-style log lines, in one place so their format (which users grep and tests parse)
// is easy to keep stable.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace megacpp::training::reporting {

struct IterationStats {
  std::string timestamp;  // "YYYY-MM-DD HH:MM:SS" (local time), as Megatron prefixes the line; "" for none
  int64_t iteration = 0, train_iters = 0, consumed_samples = 0, global_batch = 0;
  double ms_per_iteration = 0, learning_rate = 0, loss = 0, grad_norm = 0;
  std::vector<std::pair<std::string, double>> auxiliary_losses;  // after lm loss, e.g. load_balancing_loss
  double tokens_per_second = 0;           // all ranks together
  double tokens_per_second_per_rank = 0;
  double tflops_per_rank = 0;
  double mfu = -1;                        // fraction of --peak-tflops; < 0: no peak known
  double loss_scale = -1;                 // < 0: no loss scaler
  int64_t skipped_iterations = -1;        // in the interval (--fp16); < 0: not shown
};

std::string iteration_line(const IterationStats& stats);

// The local time as Megatron's log lines show it: "2026-11-25 10:00:00".
std::string log_timestamp();

// Megatron's start-up block: "------------------------ arguments ------------------------", then
// "  name ........ value" for every flag under Megatron's underscore name (sorted), then
// "-------------------- end of arguments ---------------------".
std::string arguments_block(const std::map<std::string, std::string>& flags);

// What a run did, for the line after training.
struct RunSummary {
  int64_t last_iteration = 0, iterations_run = 0, tokens = 0;
  double seconds = 0;
  std::optional<std::pair<int64_t, double>> best_validation;  // (iteration, loss)
  std::optional<double> last_validation;
  std::string checkpoint;  // the last one saved, "" if none
};
std::string summary_line(const RunSummary& summary);

// Megatron's framed block: "validation loss at iteration N | lm loss value: X | lm loss PPL: P |".
// `where` is e.g. "iteration 100" or "the end of training for val data".
std::string validation_block(const std::string& where, double loss);

}  // namespace megacpp::training::reporting
