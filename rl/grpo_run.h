// megacpp-grpo: GRPO on prompts with verifiable answers, as ROLL's RLVR pipeline and verl's
// GSM8K recipe run it. The actor and the reference are the model of megacpp-train's flags,
// sharded with FSDP2 over the trainer's ranks and filled from --load or --init-from-hf-path; the
// rollout is colocated (an unsharded copy in every trainer process) or runs on the last
// --rollout-ranks ranks of the job (Note [Remote rollout]). Each step takes --rollout-batch-size
// prompts, samples --num-return-sequences-in-group responses to each, rewards the exact answer
// (rl/exact_answer.h) and runs rl::grpo_step; rank 0 logs each step and the held-out reward of
// greedy answers to --eval-prompts before training, every --eval-interval steps and at the end;
// the actor is saved as megacpp-train saves (--save, --save-interval).
#pragma once

#include <cstdint>
#include <string>

#include "rl/actor_update.h"
#include "rl/objective_options.h"
#include "settings/arguments.h"

namespace megacpp::rl {

struct GrpoOptions {
  std::string prompts;               // --prompts: JSON lines {"prompt", "answer"} (required)
  std::string eval_prompts;          // --eval-prompts: held-out ones, answered greedily
  int64_t eval_interval = 0;         // --eval-interval: steps between evaluations (0: before and after only)
  int64_t rollout_batch_size = 8;    // --rollout-batch-size (ROLL's rollout_batch_size): prompts per step, all ranks
  int64_t group_size = 4;            // --num-return-sequences-in-group (ROLL's; verl's rollout.n)
  int64_t response_length = 32;      // --response-length (ROLL's response_length): new tokens at most
  double temperature = 1.0;          // --temperature, --top-p, --top-k: ROLL's generating_args
  double top_p = 1.0;
  int64_t top_k = 0;
  int rollout_ranks = 0;             // --rollout-ranks: the last ranks generate (0: colocated)
  double kl_coef = kDefaultKlCoef;   // --kl-coef (verl's kl_loss_coef; 0: no reference)
  std::string kl_estimator = "low_var_kl";  // --kl-loss-type (verl's)
  int64_t infer_batch_size = 16;     // --infer-batch-size: the forward-only passes' (ROLL's)
  int64_t micro_batch_size = 4;      // --ppo-micro-batch-size: responses per forward of the update
  // One optimizer step per mini-batch: --ppo-mini-batch-size prompts over all data-parallel ranks
  // (verl's ppo_mini_batch_size) or --gradient-accumulation-steps micro-batches per rank (ROLL's
  // per_device_train_batch_size x gradient_accumulation_steps); 0: one step per rollout batch.
  int64_t mini_batch_size = 0;
  int64_t gradient_accumulation = 0;
  int64_t epochs = 1;                // --ppo-epochs: passes over each rollout batch (verl's, ROLL's ppo_epochs)
  int64_t sync_chunk_mb = 512;       // --weight-sync-chunk-mb: the separate ranks' chunk size
  std::string reference_load;        // --reference-load: the reference's checkpoint (else --load's)
  ObjectiveOptions objective;        // advantages and policy loss (rl/objective_options.h)
  // From --rl-config-path (settings/rlvr_config.h): actor_train's FSDP2 config, and how many trainer
  // ranks its device_mapping names (0: not given).
  std::string train_strategy_yaml, train_strategy_source;
  int trainer_ranks = 0;
  std::string experiment;            // ROLL's exp_name, named in the first log line
};

// Runs on the launch environment's ranks (megacpp-run, torchrun). Returns the exit code; an error
// is printed as "PROGRAM: error: ..." first.
int run_grpo(settings::TrainingArguments args, const GrpoOptions& options, const char* program = "megacpp-grpo");

}  // namespace megacpp::rl
