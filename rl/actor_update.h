// The actor's side of a GRPO / PPO update on a rollout batch, as verl's dp_actor.update_policy
// runs one mini-batch: each micro-batch's forward with gradients gives every response token's
// log-probability under the current policy (at the rollout's temperature); the loss is PPO's
// clipped surrogate against the rollout's old log-probs with the responses' advantages, plus
// kl_coef x the KL to the reference (verl's use_kl_loss), minus entropy_coef x the entropy of the
// policy at the response tokens (an exploration bonus), each aggregated alike; each micro-batch's backward is
// scaled by its share of the batch (verl's micro / mini batch size). The caller clips and steps.
// Under FSDP2 every rank of the mesh passes as many responses (gradients are reduced once, after
// the last micro-batch) and the engine averages the data-parallel ranks' gradients.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "models/language_model.h"
#include "parallel/group.h"
#include "rl/policy_loss.h"

namespace megacpp::rl {

struct RolloutBatch {
  at::Tensor ids;             // [n, L] int64 on the CPU: each a prompt and its response, right-padded
  at::Tensor response_mask;   // [n, L - 1]: 1 where position t scores a response token (ids[t + 1])
  at::Tensor advantages;      // [n] one per response
  at::Tensor old_log_probs;   // [n, L - 1] fp32, the sampling policy's
  at::Tensor ref_log_probs;   // [n, L - 1] fp32, the reference's; undefined: no KL term
};

// verl's kl_loss_coef default: the weight of the KL term to the reference (--kl-coef).
inline constexpr double kDefaultKlCoef = 0.001;

struct ActorUpdate {
  PolicyLossOptions policy;
  double kl_coef = kDefaultKlCoef;
  double entropy_coef = 0;              // verl's entropy_coeff, ROLL's entropy_loss_coef: minus this x the entropy
  KlEstimator kl = KlEstimator::kK3;    // verl's kl_loss_type, low_var_kl by default
  double temperature = 1.0;             // the rollout's: the log-probs are those of what was sampled
  int64_t micro_batch_size = 1;         // responses per forward (verl's ppo_micro_batch_size_per_gpu)
  c10::Device device = c10::Device(c10::kCPU);
  bool fsdp = false;                    // the actor is sharded: reduce gradients after the last micro-batch only
  // Splits each sequence (Note [Ulysses]): every rank of the group is given the same batch, runs
  // its slice of the positions and backpropagates its share of the loss (the engine divides the
  // gradients by the data-parallel size, so the shares add up); the statistics are the group's.
  parallel::Group cp = parallel::Group::single(0);
};

struct ActorUpdateStats {  // this rank's, each weighted by the micro-batches' shares
  double policy_loss = 0, kl = 0, clip_fraction = 0, approx_kl = 0, entropy = 0;
};

// Forward and backward over `batch`; gradients accumulate into the actor's parameters. Throws
// std::invalid_argument naming a tensor of the wrong shape.
ActorUpdateStats actor_backward(models::LanguageModel& actor, const RolloutBatch& batch, const ActorUpdate& update);

}  // namespace megacpp::rl
