#include "rl/actor_update.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "inference/token_log_probs.h"
#include "parallel/fsdp/fully_shard.h"

namespace megacpp::rl {
namespace {

void check_batch(const RolloutBatch& b, int64_t micro_batch_size) {
  if (b.ids.dim() != 2 || b.ids.scalar_type() != torch::kLong || b.ids.size(1) < 2) {
    throw std::invalid_argument("actor update: ids must be int64 [responses, tokens >= 2], got " + c10::str(b.ids.sizes()));
  }
  const std::vector<int64_t> per_token{b.ids.size(0), b.ids.size(1) - 1};
  auto require = [&](const at::Tensor& t, const std::vector<int64_t>& shape, const char* name) {
    if (!t.defined() || t.sizes().vec() != shape) {
      throw std::invalid_argument(std::string("actor update: ") + name + " must be " + c10::str(c10::IntArrayRef(shape)) + ", got " +
                                  (t.defined() ? c10::str(t.sizes()) : std::string("nothing")));
    }
  };
  require(b.response_mask, per_token, "response_mask");
  require(b.old_log_probs, per_token, "old_log_probs");
  require(b.advantages, {b.ids.size(0)}, "advantages");
  if (b.ref_log_probs.defined()) require(b.ref_log_probs, per_token, "ref_log_probs");
  if (micro_batch_size <= 0) throw std::invalid_argument("actor update: the micro-batch size must be positive");
}

}  // namespace

ActorUpdateStats actor_backward(models::LanguageModel& actor, const RolloutBatch& batch, const ActorUpdate& update) {
  check_batch(batch, update.micro_batch_size);
  const int64_t n = batch.ids.size(0), scored = batch.ids.size(1) - 1;
  ActorUpdateStats stats;
  for (int64_t first = 0; first < n; first += update.micro_batch_size) {
    const int64_t count = std::min(update.micro_batch_size, n - first);
    const double share = static_cast<double>(count) / static_cast<double>(n);
    auto rows = [&](const at::Tensor& t) { return t.narrow(0, first, count).to(update.device); };
    const at::Tensor ids = rows(batch.ids), mask = rows(batch.response_mask).to(torch::kFloat);
    if (update.fsdp) parallel::fsdp::set_requires_gradient_sync(actor, first + count >= n);
    const at::Tensor logits = actor(ids.narrow(1, 0, scored));
    const inference::TokenLogProbs current =
        inference::label_log_probs(logits, ids.narrow(1, 1, scored), update.temperature, /*with_entropy=*/true);
    const at::Tensor advantages = rows(batch.advantages).to(torch::kFloat).unsqueeze(1).expand({count, scored});
    const PolicyLoss policy = clipped_policy_loss(current.log_probs, rows(batch.old_log_probs), advantages, mask, update.policy);
    at::Tensor loss = policy.loss;
    if (batch.ref_log_probs.defined()) {
      const at::Tensor kl = aggregate(kl_penalty(current.log_probs, rows(batch.ref_log_probs), update.kl), mask, update.policy.aggregation);
      loss = loss + update.kl_coef * kl;
      stats.kl += share * kl.item<double>();
    }
    (loss * share).backward();
    stats.policy_loss += share * policy.loss.item<double>();
    stats.clip_fraction += share * policy.clip_fraction;
    stats.approx_kl += share * policy.approx_kl;
    stats.entropy += share * ((current.entropy.detach() * mask).sum() / mask.sum().clamp_min(1)).item<double>();
  }
  return stats;
}

}  // namespace megacpp::rl
