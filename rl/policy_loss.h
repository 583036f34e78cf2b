// GRPO's and PPO's objectives, as verl's core_algos computes them (ROLL's are the same): the
// advantages of a group of responses to one prompt, the clipped policy loss on the response
// tokens, the KL penalty to a reference model, and the aggregation of per-token losses. Every
// per-token tensor is [responses, tokens] fp32 with a mask of the same shape (1: a response
// token that counts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace megacpp::rl {

// GRPO's outcome advantage: each response's score minus its group's mean, divided by the
// group's standard deviation (unbiased, as torch.std) + epsilon unless `divide_by_std` is false
// (Dr. GRPO); a group of one response has mean 0 and deviation 1. `scores` [n], `groups` n ids.
at::Tensor group_advantages(const at::Tensor& scores, const std::vector<int64_t>& groups, bool divide_by_std = true,
                            double epsilon = 1e-6);

// verl's loss_agg_mode: "token-mean" (over every counted token of the batch), "seq-mean-token-sum"
// (each response's sum, averaged over responses), "seq-mean-token-mean" (each response's mean,
// averaged over responses).
enum class LossAggregation { kTokenMean, kSeqMeanTokenSum, kSeqMeanTokenMean };
LossAggregation loss_aggregation_named(const std::string& name);
at::Tensor aggregate(const at::Tensor& losses, const at::Tensor& mask, LossAggregation how);

// verl's kl_penalty estimators of KL(policy || reference) per token: "kl" (k1: log p - log r),
// "abs" (|k1|), "mse" (k2: k1^2 / 2), "low_var_kl" (k3: r/p - log(r/p) - 1, clamped to [-10, 10]).
enum class KlEstimator { kK1, kAbs, kK2, kK3 };
KlEstimator kl_estimator_named(const std::string& name);
at::Tensor kl_penalty(const at::Tensor& log_probs, const at::Tensor& ref_log_probs, KlEstimator estimator);

struct PolicyLossOptions {
  double clip_low = 0.2, clip_high = 0.2;  // the ratio kept within [1 - clip_low, 1 + clip_high]
  double dual_clip = 3.0;                  // negative advantages: the loss at most -advantage x dual_clip
  LossAggregation aggregation = LossAggregation::kTokenMean;
};

struct PolicyLoss {
  at::Tensor loss;            // scalar, differentiable in log_probs
  double clip_fraction = 0;   // of counted tokens where the clipped term won
  double approx_kl = 0;       // mean of old - new log-prob over counted tokens
};

// PPO's clipped surrogate with dual clip: ratio = exp(log_probs - old_log_probs) (the log-ratio
// clamped to [-20, 20]), per token max(-A ratio, -A clip(ratio)), and for A < 0 at most
// -A dual_clip; aggregated over the mask. `advantages` [responses, tokens] (a response's
// advantage on each of its tokens).
PolicyLoss clipped_policy_loss(const at::Tensor& log_probs, const at::Tensor& old_log_probs, const at::Tensor& advantages,
                               const at::Tensor& mask, const PolicyLossOptions& options = {});

}  // namespace megacpp::rl
