#include "rl/grpo_log.h"

#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace megacpp::rl {
namespace {

std::string byte_size(int64_t bytes) {
  return bytes >= (1 << 20) ? fmt::format("{:.1f} MiB", bytes / 1048576.0) : fmt::format("{:.1f} KiB", bytes / 1024.0);
}

}  // namespace

GrpoLog::GrpoLog(const settings::TrainingArguments& args, bool writes, bool masked) : args_(args), writes_(writes), masked_(masked) {
  if (writes_ && !args.tensorboard_dir.empty()) {
    tensorboard_ = std::make_unique<io::metrics::TensorBoardWriter>(args.tensorboard_dir);
    spdlog::info("tensorboard: writing {}", tensorboard_->path());
  }
}

void GrpoLog::step(int64_t step, const GrpoStepStats& stats, double learning_rate, double seconds) {
  if (!writes_) return;
  if (tensorboard_ && step % args_.tensorboard_log_interval == 0) {
    const std::pair<const char*, double> scalars[] = {
        {"reward", stats.reward},         {"response-length", stats.response_length}, {"kl", stats.update.kl},
        {"entropy", stats.update.entropy}, {"clip-fraction", stats.update.clip_fraction}, {"policy-loss", stats.update.policy_loss},
        {"approx-kl", stats.update.approx_kl}, {"learning-rate", learning_rate},     {"time/weight-sync-seconds", stats.sync.seconds},
        {"time/step-seconds", seconds}};
    for (const auto& [tag, value] : scalars) tensorboard_->add_scalar(tag, value, step);
    if (masked_) tensorboard_->add_scalar("responses-kept", stats.kept, step);
    tensorboard_->flush();
  }
  if (step % args_.log_interval != 0 && step != args_.train_iters) return;
  const std::string kept = !masked_ ? std::string() : stats.skipped ? std::string(" | responses kept 0 (step skipped)")
                                                                    : fmt::format(" | responses kept {:.4f}", stats.kept);
  const std::string chunks = stats.sync.chunks > 0 ? fmt::format(" in {} chunk(s)", stats.sync.chunks) : std::string();
  std::printf("grpo step %lld/%lld | reward %.4f | response length %.2f%s | kl %.5f | entropy %.4f | clip fraction %.4f | "
              "policy loss %.5f | learning rate %.4E | weight sync %.3f s, %s%s | %.2f s\n",
              static_cast<long long>(step), static_cast<long long>(args_.train_iters), stats.reward, stats.response_length, kept.c_str(),
              stats.update.kl, stats.update.entropy, stats.update.clip_fraction, stats.update.policy_loss, learning_rate,
              stats.sync.seconds, byte_size(stats.sync.bytes).c_str(), chunks.c_str(), seconds);
  std::fflush(stdout);
}

void GrpoLog::evaluation(int64_t step, double correct, double prompts) {
  if (!writes_) return;
  std::printf("grpo eval | step %lld | held-out exact-answer reward %.4f (%lld of %lld prompts, greedy)\n", static_cast<long long>(step),
              correct / prompts, static_cast<long long>(correct), static_cast<long long>(prompts));
  std::fflush(stdout);
  if (tensorboard_) {
    tensorboard_->add_scalar("eval/exact-answer-reward", correct / prompts, step);
    tensorboard_->flush();
  }
}

}  // namespace megacpp::rl
