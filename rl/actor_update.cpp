#include "rl/actor_update.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "inference/token_log_probs.h"
#include "parallel/collectives.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/ulysses.h"

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
  const bool split = update.cp.size() > 1;
  if (split && scored % update.cp.size() != 0) {
    throw std::invalid_argument("actor update: " + std::to_string(scored) + " positions do not split over the Ulysses group of " +
                                std::to_string(update.cp.size()));
  }
  if (split && update.policy.sequence_ratio) {
    throw std::invalid_argument("actor update: a sequence-level ratio needs every position of a response on one rank, not a Ulysses slice");
  }
  auto mine = [&](const at::Tensor& t) { return split ? parallel::sequence_slice(t, 1, update.cp) : t; };
  ActorUpdateStats stats;
  for (int64_t first = 0; first < n; first += update.micro_batch_size) {
    const int64_t count = std::min(update.micro_batch_size, n - first);
    const double share = static_cast<double>(count) / static_cast<double>(n);
    auto rows = [&](const at::Tensor& t) { return t.narrow(0, first, count).to(update.device); };
    const at::Tensor ids = rows(batch.ids), whole_mask = rows(batch.response_mask).to(torch::kFloat);
    const at::Tensor tokens = whole_mask.sum(-1), mask = mine(whole_mask);  // the whole sequences' counts, this rank's positions
    if (update.fsdp) parallel::fsdp::set_requires_gradient_sync(actor, first + count >= n);
    const at::Tensor logits = actor(mine(ids.narrow(1, 0, scored)));
    const inference::TokenLogProbs current =
        inference::label_log_probs(logits, mine(ids.narrow(1, 1, scored)), update.temperature, /*with_entropy=*/true);
    const at::Tensor advantages = rows(batch.advantages).to(torch::kFloat).unsqueeze(1).expand_as(mask);
    const PolicyLoss policy = clipped_policy_loss(current.log_probs, mine(rows(batch.old_log_probs)), advantages, mask, update.policy, tokens);
    at::Tensor loss = policy.loss, kl;
    if (batch.ref_log_probs.defined()) {
      kl = aggregate(kl_penalty(current.log_probs, mine(rows(batch.ref_log_probs)), update.kl), mask, update.policy.aggregation, tokens);
      loss = loss + update.kl_coef * kl;
    }
    if (update.entropy_coef != 0) loss = loss - update.entropy_coef * aggregate(current.entropy, mask, update.policy.aggregation, tokens);
    (loss * share).backward();
    // The group's figures: the loss shares add up; the means are over every position's tokens.
    const double counted = mask.sum().item<double>();
    at::Tensor figures = torch::tensor({policy.loss.item<double>(), kl.defined() ? kl.item<double>() : 0.0, policy.clip_fraction * counted,
                                        policy.approx_kl * counted, (current.entropy.detach() * mask).sum().item<double>(), counted},
                                       torch::kDouble);
    if (split) {
      figures = figures.to(update.device);
      parallel::all_reduce(update.cp, figures, parallel::ReduceOp::kSum).wait();
      figures = figures.to(torch::kCPU);
    }
    const double* f = figures.data_ptr<double>();
    const double tokens_seen = std::max(1.0, f[5]);
    stats.policy_loss += share * f[0];
    stats.kl += share * f[1];
    stats.clip_fraction += share * f[2] / tokens_seen;
    stats.approx_kl += share * f[3] / tokens_seen;
    stats.entropy += share * f[4] / tokens_seen;
  }
  return stats;
}

}  // namespace megacpp::rl
