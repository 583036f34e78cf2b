#include "rl/objective_options.h"

#include <limits>
#include <stdexcept>

namespace megacpp::rl {
namespace {

[[noreturn]] void refuse(const std::string& why) { throw std::invalid_argument(why); }

RewardNorm norm_of(const std::string& flag, const std::string& value, RewardNorm otherwise) {
  if (value.empty()) return otherwise;
  try {
    return reward_norm_named(value);
  } catch (const std::invalid_argument& e) {
    refuse("--" + flag + ": " + e.what());
  }
}

}  // namespace

RewardShaping reward_shaping(const ObjectiveOptions& o) {
  RewardShaping s;
  if (o.adv_estimator == "grpo") {
    for (const auto& [flag, value] : {std::pair{"norm-mean-type", o.norm_mean_type}, std::pair{"norm-std-type", o.norm_std_type}}) {
      if (!value.empty() && value != "group") {
        refuse(std::string("--") + flag + " " + value + ": --adv-estimator grpo normalizes within each prompt's group (ROLL sets both "
               "types to group for it); give --adv-estimator reinforce to normalize otherwise");
      }
    }
  } else if (o.adv_estimator == "reinforce") {
    s.mean = norm_of("norm-mean-type", o.norm_mean_type, RewardNorm::kNone);
    s.deviation = norm_of("norm-std-type", o.norm_std_type, RewardNorm::kNone);
  } else {
    refuse("--adv-estimator " + o.adv_estimator + ": expected grpo or reinforce (gae needs a critic, which megacpp-grpo does not train)");
  }
  if (o.reward_clip < 0 || o.advantage_clip < 0) refuse("--reward-clip and --advantage-clip must be >= 0 (0: no clip)");
  s.reward_clip = o.reward_clip;
  s.advantage_clip = o.advantage_clip;
  s.whiten_advantages = o.whiten_advantages;
  s.max_len_mask = o.max_len_mask;
  if (!o.difficulty_mask && (o.difficulty_low || o.difficulty_high)) {
    refuse("--difficulty-low-threshold and --difficulty-high-threshold take effect with --difficulty-mask only");
  }
  s.difficulty_mask = o.difficulty_mask;
  s.difficulty_low = o.difficulty_low.value_or(0.0);
  s.difficulty_high = o.difficulty_high.value_or(1.0);
  if (s.difficulty_mask && !(s.difficulty_low < s.difficulty_high)) {
    refuse("--difficulty-low-threshold must be below --difficulty-high-threshold (a group is kept when its mean score lies between)");
  }
  if (!o.error_max_len_clip && o.error_max_len_threshold) refuse("--error-max-len-threshold takes effect with --error-max-len-clip only");
  s.error_max_len_clip = o.error_max_len_clip;
  s.error_max_len_threshold = o.error_max_len_threshold.value_or(std::numeric_limits<int64_t>::max());
  return s;
}

PolicyLossOptions policy_loss_options(const ObjectiveOptions& o) {
  PolicyLossOptions p;
  p.clip_low = o.clip_ratio_low.value_or(o.clip_ratio);
  p.clip_high = o.clip_ratio_high.value_or(o.clip_ratio);
  if (!(p.clip_low > 0 && p.clip_low < 1) || !(p.clip_high > 0)) {
    refuse("--clip-ratio, --clip-ratio-low and --clip-ratio-high: the ratio is kept within [1 - low, 1 + high], 0 < low < 1, high > 0");
  }
  if (o.dual_clip_ratio != 0 && !(o.dual_clip_ratio > 1)) refuse("--dual-clip-ratio must exceed 1 (or be 0: no dual clip)");
  p.dual_clip = o.dual_clip_ratio;
  if (o.importance_sampling != "token" && o.importance_sampling != "seq") {
    refuse("--importance-sampling " + o.importance_sampling + ": expected token (each token's ratio) or seq (each response's)");
  }
  p.sequence_ratio = o.importance_sampling == "seq";
  try {
    p.aggregation = loss_aggregation_named(o.loss_agg_mode);
  } catch (const std::invalid_argument& e) {
    refuse(std::string("--loss-agg-mode: ") + e.what());
  }
  return p;
}

}  // namespace megacpp::rl
