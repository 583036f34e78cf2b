// From each response's score to its advantage, as ROLL's RLVR pipeline takes it
// (roll/utils/functionals.py: get_sample_level_mask, reward_postprocess, compute_advantage):
//   1. which responses count (ROLL's final_response_mask): all, less those that used every new
//      token (max_len_mask), those whose group's mean score is not strictly between two
//      thresholds (difficulty_mask), and wrong ones at least a length long (error_max_len_clip);
//   2. the score normalized: its group's or the batch's mean subtracted, divided by the group's or
//      the batch's standard deviation (unbiased) + 1e-6, or neither (norm_mean_type,
//      norm_std_type; GRPO's is group and group), then clamped to +-reward_clip;
//   3. that reward is the advantage of each of the response's tokens (REINFORCE's return with
//      gamma 1: the outcome reward sits on the last token), whitened over the counted tokens of
//      the batch (whiten_advantages: (A - mean) / sqrt(unbiased var + 1e-8)), clamped to
//      +-advantage_clip.
// The batch is every data-parallel rank's responses: its statistics are sums the caller adds up
// over the ranks (each response counted once); a group's are the rank's own (groups never split).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace megacpp::rl {

enum class RewardNorm { kNone, kBatch, kGroup };
// "none" (ROLL's null), "batch" or "group"; ROLL's "running" and others are refused.
RewardNorm reward_norm_named(const std::string& name);

struct RewardShaping {
  RewardNorm mean = RewardNorm::kGroup, deviation = RewardNorm::kGroup;  // GRPO's
  double reward_clip = 0;     // > 0: the normalized rewards within [-reward_clip, reward_clip]
  bool whiten_advantages = false;
  double advantage_clip = 0;  // > 0: the advantages within [-advantage_clip, advantage_clip]
  bool max_len_mask = false;
  bool difficulty_mask = false;
  double difficulty_low = 0, difficulty_high = 1;  // kept: low < the group's mean score < high
  bool error_max_len_clip = false;
  int64_t error_max_len_threshold = 0;  // kept: right (score 1), or wrong (0) and shorter than this
  // Whether any step needs sums over the whole batch (a collective per step).
  bool needs_batch() const;
};

struct ResponseOutcomes {  // this rank's responses
  at::Tensor scores;            // [n] the reward function's
  std::vector<int64_t> groups;  // the prompt each answers
  at::Tensor lengths;           // [n] int64: tokens generated
  int64_t max_new_tokens = 0;   // the limit they were generated under
};

struct ShapedAdvantages {
  at::Tensor advantages;  // [n] fp32 (0 where a response does not count)
  at::Tensor kept;        // [n] fp32: 1 where a response's tokens count in the loss
  // Over the batch (this rank's when !needs_batch(): then every response counts).
  double kept_responses = 0, responses = 0;
};

// Adds a small fp64 CPU tensor up over the data-parallel ranks (each rank's responses once); the
// identity on one rank.
using SumOverBatch = std::function<at::Tensor(const at::Tensor&)>;

// GRPO's outcome advantage: each response's score minus its group's mean, divided by the group's
// standard deviation (unbiased, as torch.std) + 1e-6 unless `divide_by_std` is false (Dr. GRPO);
// a group of one response has mean 0 and deviation 1. `scores` [n], `groups` n ids; fp32.
at::Tensor group_advantages(const at::Tensor& scores, const std::vector<int64_t>& groups, bool divide_by_std = true);

// Collective through `sum` when shaping.needs_batch() (the rewards' sums, and with whitening the
// advantages'). Throws std::invalid_argument naming sizes that do not match.
ShapedAdvantages shape_advantages(const ResponseOutcomes& outcomes, const RewardShaping& shaping, const SumOverBatch& sum);

}  // namespace megacpp::rl
