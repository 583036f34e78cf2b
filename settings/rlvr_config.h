// ROLL's RLVR pipeline YAML for megacpp-grpo (--rl-config-path): the keys ROLL's examples set
// become the flags they mean (max_steps -> --train-iters, actor_train.training_args.learning_rate
// -> --lr, actor_infer.generating_args.top_p -> --top-p, ...), and actor_train's model_args and
// strategy_args (strategy_name fsdp2_train) are its FSDP2 config, read as --fsdp2-config-path
// reads ROLL's layout; with strategy_name megatron_train its strategy_config keys are Megatron's
// flags of the same names (tensor_model_parallel_size, sequence_parallel, recompute_*, ...),
// checked as in a Megatron script, and the reference's megatron_infer must split as the actor.
// device_mapping places the workers: actor_infer on actor_train's ranks is colocated, on the
// ranks after them --rollout-ranks; the reference (fsdp2_infer) shares the actor's ranks and
// strategy_config. ROLL's algorithm keys (adv_estimator, norm_*_type, the clips, whitening, the
// masks, dual_clip_loss, loss_agg_mode, ...) are megacpp-grpo's objective flags
// (settings/rlvr_algorithm.cpp). ${key} takes a top-level key's value, as OmegaConf does. A key
// megacpp does not read, or a setting it cannot honour (gae, vLLM's strategy_config), is refused
// naming the file, line and key.
#pragma once

#include <string>

#include "settings/rlvr_flags.h"

namespace megacpp::settings {

// Throws std::invalid_argument naming the file, line and key.
RlvrConfig read_rlvr_config(const std::string& path);

}  // namespace megacpp::settings
