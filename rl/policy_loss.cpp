#include "rl/policy_loss.h"

#include <stdexcept>

#include <torch/torch.h>

namespace megacpp::rl {
namespace {

void check_same_shape(const at::Tensor& a, const at::Tensor& b, const char* what) {
  if (a.sizes() != b.sizes()) {
    throw std::invalid_argument(std::string(what) + ": shapes " + c10::str(a.sizes()) + " and " + c10::str(b.sizes()) + " differ");
  }
}

// sum(x * mask) / sum(mask), the mean over counted tokens (0 when none counts).
at::Tensor masked_mean(const at::Tensor& x, const at::Tensor& mask) { return (x * mask).sum() / mask.sum().clamp_min(1); }

}  // namespace

LossAggregation loss_aggregation_named(const std::string& name) {
  if (name == "token-mean") return LossAggregation::kTokenMean;
  if (name == "seq-mean-token-sum") return LossAggregation::kSeqMeanTokenSum;
  if (name == "seq-mean-token-mean") return LossAggregation::kSeqMeanTokenMean;
  throw std::invalid_argument("loss_agg_mode " + name + ": expected token-mean, seq-mean-token-sum or seq-mean-token-mean");
}

at::Tensor aggregate(const at::Tensor& losses, const at::Tensor& mask, LossAggregation how, const at::Tensor& tokens) {
  check_same_shape(losses, mask, "aggregate");
  const at::Tensor m = mask.to(losses.scalar_type());
  const at::Tensor whole = tokens.defined() ? tokens.to(losses.scalar_type()) : m.sum(-1);
  if (whole.dim() != 1 || whole.size(0) != m.size(0)) {
    throw std::invalid_argument("aggregate: " + c10::str(whole.sizes()) + " token counts for " + std::to_string(m.size(0)) + " responses");
  }
  const at::Tensor sums = (losses * m).sum(-1);
  if (how == LossAggregation::kTokenMean) return sums.sum() / whole.sum().clamp_min(1);
  const at::Tensor per_response = how == LossAggregation::kSeqMeanTokenSum ? sums : sums / whole.clamp_min(1);
  return per_response.sum() / whole.gt(0).sum().clamp_min(1);  // a response without a counted token does not count
}

KlEstimator kl_estimator_named(const std::string& name) {
  if (name == "kl" || name == "k1") return KlEstimator::kK1;
  if (name == "abs") return KlEstimator::kAbs;
  if (name == "mse" || name == "k2") return KlEstimator::kK2;
  if (name == "low_var_kl" || name == "k3") return KlEstimator::kK3;
  throw std::invalid_argument("kl_penalty " + name + ": expected kl (k1), abs, mse (k2) or low_var_kl (k3)");
}

at::Tensor kl_penalty(const at::Tensor& log_probs, const at::Tensor& ref_log_probs, KlEstimator estimator) {
  check_same_shape(log_probs, ref_log_probs, "kl_penalty");
  const at::Tensor k1 = log_probs - ref_log_probs;
  switch (estimator) {
    case KlEstimator::kK1: return k1;
    case KlEstimator::kAbs: return k1.abs();
    case KlEstimator::kK2: return 0.5 * k1.pow(2);
    case KlEstimator::kK3: {
      const at::Tensor log_ratio = (-k1).clamp(-20, 20);  // log(r / p)
      return (log_ratio.exp() - log_ratio - 1).clamp(-10, 10);
    }
  }
  throw std::logic_error("kl_penalty: unknown estimator");
}

PolicyLoss clipped_policy_loss(const at::Tensor& log_probs, const at::Tensor& old_log_probs, const at::Tensor& advantages,
                               const at::Tensor& mask, const PolicyLossOptions& options, const at::Tensor& tokens) {
  check_same_shape(log_probs, old_log_probs, "clipped_policy_loss: log_probs and old_log_probs");
  check_same_shape(log_probs, advantages, "clipped_policy_loss: log_probs and advantages");
  check_same_shape(log_probs, mask, "clipped_policy_loss: log_probs and mask");
  if (options.dual_clip != 0 && !(options.dual_clip > 1)) {
    throw std::invalid_argument("clipped_policy_loss: the dual clip must exceed 1 (or be 0: none)");
  }
  const at::Tensor m = mask.to(log_probs.scalar_type());
  const at::Tensor log_ratio = (log_probs - old_log_probs).clamp(-20, 20);
  const at::Tensor ratio = options.sequence_ratio
                               ? ((log_ratio * m).sum(-1, true) / m.sum(-1, true).clamp_min(1)).exp().expand_as(log_ratio)
                               : log_ratio.exp();
  const at::Tensor unclipped = -advantages * ratio;
  const at::Tensor clipped = -advantages * ratio.clamp(1 - options.clip_low, 1 + options.clip_high);
  const at::Tensor pessimistic = torch::maximum(unclipped, clipped);
  const at::Tensor losses = options.dual_clip == 0 ? pessimistic
                                                   : torch::where(advantages < 0, torch::minimum(pessimistic, -advantages * options.dual_clip),
                                                                  pessimistic);
  PolicyLoss result;
  result.loss = aggregate(losses, m, options.aggregation, tokens);
  torch::NoGradGuard no_grad;
  result.clip_fraction = masked_mean(clipped.gt(unclipped).to(m.scalar_type()), m).item<double>();
  result.approx_kl = masked_mean(-log_ratio, m).item<double>();
  return result;
}

}  // namespace megacpp::rl
