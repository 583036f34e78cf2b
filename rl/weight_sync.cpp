#include "rl/weight_sync.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "parallel/fsdp/fsdp_param.h"
#include "parallel/fsdp/fully_shard.h"

namespace megacpp::rl {
namespace {

std::string shape_text(c10::IntArrayRef shape) { return c10::str(shape); }

// Every trainer parameter has its rollout twin of the same full shape, and the other way round.
void check_same_model(torch::nn::Module& trainer, torch::nn::Module& rollout) {
  const auto targets = rollout.named_parameters(/*recurse=*/true);
  const auto sources = trainer.named_parameters(/*recurse=*/true);
  for (const auto& item : sources) {
    const at::Tensor* target = targets.find(item.key());
    if (!target) throw std::invalid_argument("weight sync: the rollout model has no parameter " + item.key() + " of the trained one");
    const std::vector<int64_t> full = parallel::fsdp::full_shape(item.value());
    if (target->sizes().vec() != full) {
      throw std::invalid_argument("weight sync: parameter " + item.key() + " is " + shape_text(full) + " in the trained model and " +
                                  shape_text(target->sizes()) + " in the rollout model");
    }
  }
  for (const auto& item : targets) {
    if (!sources.find(item.key())) throw std::invalid_argument("weight sync: the trained model has no parameter " + item.key() + " of the rollout one");
  }
}

}  // namespace

WeightSyncStats sync_colocated_weights(torch::nn::Module& trainer, torch::nn::Module& rollout) {
  const auto start = std::chrono::steady_clock::now();
  check_same_model(trainer, rollout);
  WeightSyncStats stats;
  torch::NoGradGuard no_grad;
  auto targets = rollout.named_parameters(/*recurse=*/true);
  for (const auto& item : trainer.named_parameters(/*recurse=*/true)) {
    const auto* sharded = parallel::fsdp::find_fsdp_param(item.value());
    const at::Tensor full = sharded ? sharded->gather_full() : item.value().detach();  // collective when sharded
    at::Tensor& target = targets[item.key()];
    target.copy_(full);
    stats.tensors += 1;
    stats.bytes += target.numel() * static_cast<int64_t>(target.element_size());
    if (sharded) stats.largest_gathered = std::max<int64_t>(stats.largest_gathered, full.numel() * full.element_size());
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace megacpp::rl
