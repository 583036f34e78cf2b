// Note [GRPO step]
// One step of GRPO: each rank has `responses_per_prompt` responses sampled to each of its prompts
// by the rollout (rl::RolloutEngine: an unsharded copy of the policy in the actor's processes,
// verl's hybrid engine, or workers on ranks of their own, Note [Remote rollout]), scores each
// with the reward function, turns the scores into advantages (rl::shape_advantages: GRPO's
// normalization within each prompt's group, which never spans ranks, or ROLL's others, its
// masks, whitening and clips; a step in which no response counts is skipped, as ROLL's), takes the sampling policy's log-probs and
// the reference's with forward-only passes of the sharded models (inference::sequence_log_probs,
// ROLL's fsdp2_infer), updates the actor on the response tokens (rl::actor_backward, then the
// optimizer: one step per mini-batch, so that the steps after the first are off-policy and PPO's
// clip bites, as verl's ppo_mini_batch_size has it) and loads the new weights into the rollout's
// model (RolloutEngine::sync).
// Collective over the actor's mesh: every rank passes as many prompts, the ranks of a
// tensor-parallel or Ulysses group the same ones (and a rollout that gives them the same
// responses: rl::SharedByModelParallelGroup); the gradients that TP leaves partial are summed over
// the group, and a Ulysses group's ranks each train on their slice of the positions.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/optim/optimizer.h>

#include "inference/generation.h"
#include "models/language_model.h"
#include "parallel/device_mesh.h"
#include "parallel/group.h"
#include "rl/actor_update.h"
#include "rl/reward_shaping.h"
#include "rl/rollout_engine.h"
#include "rl/weight_sync.h"

namespace megacpp::rl {

// A verifiable reward: the score of `response` (generated tokens, the stop token last when one
// ended it) to `prompt`. May throw: the step then fails naming the prompt.
using RewardFunction = std::function<double(const std::vector<int64_t>& prompt, const std::vector<int64_t>& response)>;

struct GrpoSettings {
  int64_t responses_per_prompt = 4;  // ROLL's num_return_sequences_in_group, verl's rollout.n
  inference::Sampling sampling;      // the rollout's; its seed is this step's (vary it per step and rank)
  ActorUpdate update;                // its temperature should be the sampling's
  RewardShaping shaping;             // from scores to advantages (GRPO's by default)
  // The reference log-probs are the actor's with its LoRA adapters off (verl's reference for a
  // LoRA actor: the frozen base), `reference` being null.
  bool reference_is_actor_base = false;
  int64_t infer_batch_size = 16;     // the forward-only passes' (ROLL's infer_batch_size)
  double clip_grad = 1.0;            // the gradients' global norm at most this (0: no clipping)
  // verl's ppo_mini_batch_size and ppo_epochs: the update makes one optimizer step per
  // `mini_batch_size` of this rank's responses (in order: whole prompt groups when it is a
  // multiple of responses_per_prompt), over the batch `epochs` times; 0: one step on the whole
  // batch. Every rank of the mesh makes as many steps.
  int64_t mini_batch_size = 0;
  int64_t epochs = 1;
  std::function<void()> before_step;  // called before each optimizer step (a learning-rate schedule)
  // The forwards' positions are padded to a multiple of this: with sequence parallelism the TP
  // size, with Ulysses its group's, which each sequence is split over.
  int64_t position_multiple = 1;
};

struct GrpoStepStats {  // averaged over the ranks
  double reward = 0, response_length = 0;
  double kept = 1;       // the share of the batch's responses that count (shaping's masks)
  bool skipped = false;  // none counted: no update, no sync
  ActorUpdateStats update;
  WeightSyncStats sync;  // this rank's
};

// `reference` may be null (no KL term), else a model of the actor's parameters and shapes (refused
// naming the first that differs, before anything runs); `mesh` is the actor's (and the reference's), `world` every
// rank of it (for the gradient norm's and the statistics' reductions).
GrpoStepStats grpo_step(models::LanguageModel& actor, torch::optim::Optimizer& optimizer, RolloutEngine& rollout,
                        models::LanguageModel* reference, const std::vector<std::vector<int64_t>>& prompts,
                        const RewardFunction& reward, const GrpoSettings& settings, const parallel::DeviceMesh& mesh,
                        const parallel::Group& world);

}  // namespace megacpp::rl
