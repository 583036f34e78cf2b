// PPO's objective as verl's core_algos and ROLL's actor worker compute it: the clipped policy loss
// on the response tokens, the KL penalty to a reference model, and the aggregation of per-token
// losses (rl/reward_shaping.h gives the advantages). Every
// per-token tensor is [responses, tokens] fp32 with a mask of the same shape (1: a response
// token that counts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace megacpp::rl {

// verl's and ROLL's loss_agg_mode: "token-mean" (over every counted token of the batch),
// "seq-mean-token-sum" (each response's sum, averaged over the responses with a counted token),
// "seq-mean-token-mean" (each response's mean, averaged over those responses).
enum class LossAggregation { kTokenMean, kSeqMeanTokenSum, kSeqMeanTokenMean };
LossAggregation loss_aggregation_named(const std::string& name);
// `tokens` [responses]: each response's counted tokens over its whole sequence, when `losses` and
// `mask` hold a slice of the positions (Ulysses): the result is then the slice's share, and the
// shares of a sequence's slices add up to the aggregate of the whole. Undefined: mask.sum(-1).
at::Tensor aggregate(const at::Tensor& losses, const at::Tensor& mask, LossAggregation how, const at::Tensor& tokens = {});

// verl's kl_penalty estimators of KL(policy || reference) per token: "kl" (k1: log p - log r),
// "abs" (|k1|), "mse" (k2: k1^2 / 2), "low_var_kl" (k3: r/p - log(r/p) - 1, clamped to [-10, 10]).
enum class KlEstimator { kK1, kAbs, kK2, kK3 };
KlEstimator kl_estimator_named(const std::string& name);
at::Tensor kl_penalty(const at::Tensor& log_probs, const at::Tensor& ref_log_probs, KlEstimator estimator);

struct PolicyLossOptions {
  double clip_low = 0.2, clip_high = 0.2;  // the ratio kept within [1 - clip_low, 1 + clip_high]
  // Negative advantages: the loss at most -advantage x dual_clip (verl's clip_ratio_c; ROLL's
  // dual_clip_loss is 1 + 2 x its pg_clip); 0: no dual clip.
  double dual_clip = 3.0;
  LossAggregation aggregation = LossAggregation::kTokenMean;
  // ROLL's importance_sampling "seq": every token of a response takes the ratio of the response,
  // exp of the mean of its tokens' log-ratios (over the mask), instead of its own.
  bool sequence_ratio = false;
};

struct PolicyLoss {
  at::Tensor loss;            // scalar, differentiable in log_probs
  double clip_fraction = 0;   // of counted tokens where the clipped term won
  double approx_kl = 0;       // mean of old - new log-prob over counted tokens
};

// PPO's clipped surrogate with dual clip: ratio = exp(log_probs - old_log_probs) (the log-ratio
// clamped to [-20, 20]), per token max(-A ratio, -A clip(ratio)), and for A < 0 at most
// -A dual_clip (unless 0); aggregated over the mask. `advantages` [responses, tokens] (a response's
// advantage on each of its tokens).
// `tokens` as aggregate()'s (clip_fraction and approx_kl stay the means over this mask's tokens).
PolicyLoss clipped_policy_loss(const at::Tensor& log_probs, const at::Tensor& old_log_probs, const at::Tensor& advantages,
                               const at::Tensor& mask, const PolicyLossOptions& options = {}, const at::Tensor& tokens = {});

}  // namespace megacpp::rl
