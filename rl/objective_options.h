// megacpp-grpo's objective options (its flags: launch/grpo_section.cpp), named as verl's and ROLL's keys: how the scores become
// advantages (rl/reward_shaping.h: --adv-estimator, --norm-mean-type, --norm-std-type,
// --reward-clip, --whiten-advantages, --advantage-clip and the masks) and how the policy loss
// clips and aggregates them (rl/policy_loss.h: --clip-ratio, --clip-ratio-low/-high,
// --dual-clip-ratio, --loss-agg-mode, --entropy-coeff, --importance-sampling).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rl/policy_loss.h"
#include "rl/reward_shaping.h"

namespace megacpp::rl {

struct ObjectiveOptions {
  std::string adv_estimator = "grpo";                // --adv-estimator: grpo or reinforce (ROLL's adv_estimator)
  std::string norm_mean_type, norm_std_type;         // none, batch or group ("": the estimator's)
  double reward_clip = 0, advantage_clip = 0;        // 0: none
  bool whiten_advantages = false;
  bool max_len_mask = false, difficulty_mask = false, error_max_len_clip = false;
  std::optional<double> difficulty_low, difficulty_high;  // ROLL's defaults 0 and 1
  std::optional<int64_t> error_max_len_threshold;         // none: every wrong response is kept
  double clip_ratio = 0.2;                                // --clip-ratio (ROLL's pg_clip)
  std::optional<double> clip_ratio_low, clip_ratio_high;  // verl's; ROLL's pg_clip_low / pg_clip_high
  double dual_clip_ratio = 3.0;                           // verl's clip_ratio_c (0: none)
  std::string loss_agg_mode = "token-mean";               // verl's default
  double entropy_coeff = 0;                               // verl's entropy_coeff (ROLL's entropy_loss_coef)
  std::string importance_sampling = "token";              // ROLL's: token or seq (each response's ratio)
};

// Throw std::invalid_argument naming the flag at fault (an unknown estimator or mode, a grpo
// estimator with another normalization, a threshold without its mask, a clip out of range).
RewardShaping reward_shaping(const ObjectiveOptions& o);
PolicyLossOptions policy_loss_options(const ObjectiveOptions& o);

}  // namespace megacpp::rl
