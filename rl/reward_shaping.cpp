#include "rl/reward_shaping.h"

#include <cmath>
#include <map>
#include <stdexcept>

#include <torch/torch.h>

namespace megacpp::rl {
namespace {

constexpr double kRewardEpsilon = 1e-6;  // ROLL's reward_norm and verl's GRPO advantage
constexpr double kWhitenEpsilon = 1e-8;  // ROLL's masked_whiten (and masked_mean's denominator)

struct GroupStatistics {
  at::Tensor mean, deviation;  // [n] fp64: each response's group's
};

// Each response's group's mean and unbiased standard deviation (torch.std); a group of one
// response has mean 0 and deviation 1, so its advantage is its score.
GroupStatistics group_statistics(const at::Tensor& scores, const std::vector<int64_t>& groups) {
  if (scores.dim() != 1 || scores.size(0) != static_cast<int64_t>(groups.size())) {
    throw std::invalid_argument("group advantages: " + std::to_string(groups.size()) + " group ids for scores of shape " +
                                c10::str(scores.sizes()));
  }
  const at::Tensor s = scores.to(torch::kDouble);
  std::map<int64_t, std::vector<int64_t>> members;
  for (size_t i = 0; i < groups.size(); ++i) members[groups[i]].push_back(static_cast<int64_t>(i));
  GroupStatistics g{torch::empty_like(s), torch::empty_like(s)};
  for (const auto& [group, rows] : members) {
    const at::Tensor index = torch::tensor(rows, torch::kLong), values = s.index_select(0, index);
    const bool alone = rows.size() == 1;
    g.mean.index_fill_(0, index, alone ? 0.0 : values.mean().item<double>());
    g.deviation.index_fill_(0, index, alone ? 1.0 : values.std(/*unbiased=*/true).item<double>());
  }
  return g;
}

at::Tensor kept_responses(const ResponseOutcomes& o, const RewardShaping& sh, const GroupStatistics& groups) {
  const at::Tensor scores = o.scores.to(torch::kDouble), lengths = o.lengths.to(torch::kLong);
  at::Tensor kept = torch::ones_like(scores, torch::kBool);
  if (sh.max_len_mask) kept &= lengths.ne(o.max_new_tokens);
  if (sh.difficulty_mask) kept &= groups.mean.gt(sh.difficulty_low) & groups.mean.lt(sh.difficulty_high);
  if (sh.error_max_len_clip) kept &= (scores.eq(0) & lengths.lt(sh.error_max_len_threshold)) | scores.eq(1);
  return kept.to(torch::kDouble);
}

// ROLL's masked_whiten over the counted tokens of the batch, from the batch's sums of c A,
// c A^2 and c (c: a response's counted tokens); unchanged when fewer than two tokens count.
at::Tensor whitened(const at::Tensor& advantages, const at::Tensor& tokens, const SumOverBatch& sum) {
  const at::Tensor sums = sum(torch::stack({(tokens * advantages).sum(), (tokens * advantages * advantages).sum(), tokens.sum()}));
  const double s1 = sums[0].item<double>(), s2 = sums[1].item<double>(), count = sums[2].item<double>();
  if (count <= 1) return advantages;
  const double mean = s1 / (count + kWhitenEpsilon);
  const double centred = s2 - 2 * mean * s1 + mean * mean * count;
  const double variance = centred / (count + kWhitenEpsilon) * count / (count - 1);
  return (advantages - mean) / std::sqrt(variance + kWhitenEpsilon);
}

}  // namespace

RewardNorm reward_norm_named(const std::string& name) {
  if (name == "none") return RewardNorm::kNone;
  if (name == "batch") return RewardNorm::kBatch;
  if (name == "group") return RewardNorm::kGroup;
  throw std::invalid_argument("reward normalization '" + name + "': expected none, batch or group (running statistics across steps are not kept)");
}

bool RewardShaping::needs_batch() const {
  return mean == RewardNorm::kBatch || deviation == RewardNorm::kBatch || whiten_advantages || max_len_mask || difficulty_mask ||
         error_max_len_clip;
}

at::Tensor group_advantages(const at::Tensor& scores, const std::vector<int64_t>& groups, bool divide_by_std) {
  const GroupStatistics g = group_statistics(scores, groups);
  const at::Tensor centred = scores.to(torch::kDouble) - g.mean;
  return (divide_by_std ? centred / (g.deviation + kRewardEpsilon) : centred).to(torch::kFloat);
}

ShapedAdvantages shape_advantages(const ResponseOutcomes& o, const RewardShaping& sh, const SumOverBatch& sum) {
  const GroupStatistics groups = group_statistics(o.scores, o.groups);
  if (o.lengths.numel() != o.scores.numel()) {
    throw std::invalid_argument("shape_advantages: " + std::to_string(o.lengths.numel()) + " lengths for " +
                                std::to_string(o.scores.numel()) + " scores");
  }
  const at::Tensor scores = o.scores.to(torch::kDouble), kept = kept_responses(o, sh, groups);
  ShapedAdvantages shaped;
  double batch_mean = 0, batch_deviation = 1;
  at::Tensor totals = torch::stack({scores.sum(), (scores * scores).sum(), torch::scalar_tensor(static_cast<double>(scores.numel()), torch::kDouble), kept.sum()});
  if (sh.needs_batch()) totals = sum(totals);
  const double n = totals[2].item<double>();
  shaped.responses = n;
  shaped.kept_responses = totals[3].item<double>();
  batch_mean = totals[0].item<double>() / n;
  if (n > 1) batch_deviation = std::sqrt(std::max(0.0, (totals[1].item<double>() - n * batch_mean * batch_mean) / (n - 1)));

  at::Tensor rewards = scores;
  if (sh.mean == RewardNorm::kGroup) rewards = rewards - groups.mean;
  if (sh.mean == RewardNorm::kBatch) rewards = rewards - batch_mean;
  if (sh.deviation == RewardNorm::kGroup) rewards = rewards / (groups.deviation + kRewardEpsilon);
  if (sh.deviation == RewardNorm::kBatch) rewards = rewards / (batch_deviation + kRewardEpsilon);
  if (sh.reward_clip > 0) rewards = rewards.clamp(-sh.reward_clip, sh.reward_clip);

  at::Tensor advantages = rewards;  // every token's: the outcome reward's return with gamma 1
  if (sh.whiten_advantages) advantages = whitened(advantages, o.lengths.to(torch::kDouble) * kept, sum);
  advantages = advantages * kept;
  if (sh.advantage_clip > 0) advantages = advantages.clamp(-sh.advantage_clip, sh.advantage_clip);
  shaped.advantages = advantages.to(torch::kFloat);
  shaped.kept = kept.to(torch::kFloat);
  return shaped;
}

}  // namespace megacpp::rl
