// megacpp-grpo: GRPO on prompts with exact answers (rl/grpo_run.h), ROLL's RLVR pipeline as a
// program.
//   megacpp-run --nproc-per-node 3 megacpp-grpo --prompts train.jsonl --eval-prompts held_out.jsonl \
//       --rollout-ranks 1 --rollout-batch-size 8 --num-return-sequences-in-group 4 MEGACPP-TRAIN FLAGS
// The rest of the command line is megacpp-train's (model, tokenizer, --use-torch-fsdp2,
// --fsdp2-config-path, --load [--finetune] or --init-from-hf-path, --lr, --train-iters as the
// number of steps, --save, --save-interval, --seed, --clip-grad). Its data flags may be left
// out: the prompts are the data; those of its flags that mean nothing to a GRPO run (the data,
// the batch sizes, loss scaling, profiling) are refused naming what it reads instead. The learning
// rate is constant unless --lr-decay-style is given (Megatron's schedule over the optimizer
// steps). Argument errors and failures exit 1.
#include <csignal>
#include <deque>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "launch/own_flags.h"
#include "megacpp/logging.h"
#include "models/model_flags.h"
#include "rl/grpo_run.h"
#include "rl/rlvr_config.h"
#include "settings/arguments.h"
#include "runtime/host_memory.h"
#include "megacpp/process_end.h"

namespace {

using namespace megacpp;

const std::vector<launch::OwnFlag>& own_flags() {
  static const std::vector<launch::OwnFlag> flags = {
      {"prompts", true, "JSON lines {\"prompt\": text, \"answer\": text} to train on (required)"},
      {"eval-prompts", true, "held-out JSON lines of the same kind, answered greedily before, during and after training"},
      {"eval-interval", true, "GRPO steps between held-out evaluations (default 0: before and after only)"},
      {"rollout-batch-size", true, "prompts per step over all trainer ranks (ROLL's rollout_batch_size; default 8)"},
      {"num-return-sequences-in-group", true, "responses sampled per prompt (ROLL's; verl's rollout.n; default 4)"},
      {"response-length", true, "new tokens per response at most (ROLL's response_length; default 32)"},
      {"temperature", true, "sampling temperature (generating_args; default 1)"},
      {"top-p", true, "nucleus sampling's probability mass (default 1)"},
      {"top-k", true, "sample among the k most likely tokens (default 0: all)"},
      {"rollout-ranks", true, "the last N ranks generate and take the weights by broadcast (default 0: colocated)"},
      {"kl-coef", true, "weight of the KL to the reference in the loss (verl's kl_loss_coef; default 0.001; 0: no reference)"},
      {"kl-loss-type", true, "KL estimator: kl (k1), abs, mse (k2) or low_var_kl (k3, default)"},
      {"clip-ratio", true, "PPO's ratio clip (ROLL's pg_clip; default 0.2)"},
      {"clip-ratio-low", true, "the ratio's lower clip, 1 - low (verl's clip_ratio_low; default --clip-ratio)"},
      {"clip-ratio-high", true, "the ratio's upper clip, 1 + high (verl's clip_ratio_high, DAPO's clip-higher; default --clip-ratio)"},
      {"dual-clip-ratio", true, "negative advantages' loss at most -A x this (verl's clip_ratio_c; default 3; 0: none)"},
      {"loss-agg-mode", true, "token-mean (default), seq-mean-token-sum or seq-mean-token-mean (verl's and ROLL's loss_agg_mode)"},
      {"importance-sampling", true, "token (default: each token's ratio) or seq (each response's, its tokens' mean log-ratio; ROLL's)"},
      {"entropy-coeff", true, "minus this x the policy's entropy at the response tokens in the loss (verl's; default 0)"},
      {"adv-estimator", true, "grpo (default: normalized within each prompt's group) or reinforce (ROLL's, normalized as --norm-mean-type and --norm-std-type say)"},
      {"norm-mean-type", true, "with reinforce: subtract the group's or the batch's mean score, or none (default)"},
      {"norm-std-type", true, "with reinforce: divide by the group's or the batch's standard deviation, or none (default)"},
      {"reward-clip", true, "clamp the normalized rewards to +-this (ROLL's reward_clip; default 0: none)"},
      {"whiten-advantages", false, "whiten the advantages over the batch's counted tokens (ROLL's whiten_advantages)"},
      {"advantage-clip", true, "clamp the advantages to +-this (ROLL's advantage_clip; default 0: none)"},
      {"max-len-mask", false, "leave out of the loss responses that used every new token (ROLL's max_len_mask)"},
      {"difficulty-mask", false, "leave out groups whose mean score is not strictly between the thresholds (ROLL's difficulty_mask)"},
      {"difficulty-low-threshold", true, "with --difficulty-mask (default 0)"},
      {"difficulty-high-threshold", true, "with --difficulty-mask (default 1)"},
      {"error-max-len-clip", false, "keep right responses (score 1) and wrong ones (0) shorter than the threshold (ROLL's)"},
      {"error-max-len-threshold", true, "with --error-max-len-clip (default: no limit)"},
      {"infer-batch-size", true, "sequences per forward of the log-prob passes (ROLL's infer_batch_size; default 16)"},
      {"ppo-micro-batch-size", true, "responses per forward of the update (verl's ppo_micro_batch_size_per_gpu; default 4)"},
      {"ppo-mini-batch-size", true, "prompts per optimizer step over all data-parallel ranks (verl's ppo_mini_batch_size; default: "
                                    "the rollout batch, one step)"},
      {"gradient-accumulation-steps", true, "micro-batches per optimizer step on each rank (ROLL's, with per_device_train_batch_size)"},
      {"ppo-epochs", true, "passes over each rollout batch (verl's and ROLL's ppo_epochs; default 1)"},
      {"weight-sync-chunk-mb", true, "with --rollout-ranks: MiB per broadcast of the weights (default 512)"},
      {"reference-load", true, "the reference's checkpoint (default: --load's, or --init-from-hf-path's folder)"},
      {"rl-config-path", true, "ROLL's RLVR YAML (actor_train / actor_infer / reference, generating_args, ...): its keys are read as "
                               "the flags they mean; a flag given on the command line too is an error"},
  };
  return flags;
}

// megacpp-train's flags that mean nothing to a GRPO run (refused when given, naming what does).
const std::vector<launch::UnreadFlag>& unread_flags() {
  static const char* const kSteps = "a step takes --rollout-batch-size prompts and --num-return-sequences-in-group responses to each";
  static const char* const kUpdates = "its schedule counts optimizer steps: --lr-warmup-iters, --lr-decay-iters";
  static const char* const kNoScaling = "megacpp-grpo does not scale the loss, which fp16 needs; use --bf16";
  static const char* const kPrompts = "the prompts are the data: --prompts";
  static const std::vector<launch::UnreadFlag> flags = {
      {"micro-batch-size", "responses per forward of the update: --ppo-micro-batch-size"},
      {"global-batch-size", kSteps},
      {"rampup-batch-size", kSteps},
      {"train-samples", "the number of steps is --train-iters"},
      {"lr-warmup-samples", kUpdates},
      {"lr-decay-samples", kUpdates},
      {"fp16", kNoScaling},
      {"loss-scale", kNoScaling},
      {"initial-loss-scale", kNoScaling},
      {"min-loss-scale", kNoScaling},
      {"loss-scale-window", kNoScaling},
      {"hysteresis", kNoScaling},
      {"no-check-for-nan-in-loss-and-grad", "megacpp-grpo has no NaN/Inf guard to turn off"},
      {"loss-compute-mode", "the policy loss reads each micro-batch's logits whole"},
      {"loss-chunk-size", "the policy loss reads each micro-batch's logits whole"},
      {"calculate-per-token-loss", "the policy loss aggregates as --loss-agg-mode says"},
      {"peak-tflops", "it reports no TFLOP/s"},
      {"profile", "it has no profiler"},
      {"profile-step-start", "it has no profiler"},
      {"profile-step-end", "it has no profiler"},
      {"profile-ranks", "it has no profiler"},
      {"profile-save-path", "it has no profiler"},
      {"eval-iters", "the held-out evaluation answers every --eval-prompts line"},
      {"exit-interval", "it runs --train-iters steps"},
      {"exit-duration-in-mins", "it runs --train-iters steps"},
      {"data-path", kPrompts},
      {"split", kPrompts},
      {"is-instruction-dataset", kPrompts},
      {"prompt-type", kPrompts},
      {"padded-samples", kPrompts},
      {"variable-seq-lengths", kPrompts},
      {"reset-position-ids", kPrompts},
      {"reset-attention-mask", kPrompts},
      {"eod-mask-loss", kPrompts},
      {"dataloader-type", kPrompts},
      {"num-workers", kPrompts},
      {"data-cache-path", kPrompts},
      {"image-mean", kPrompts},
      {"image-std", kPrompts},
  };
  return flags;
}

rl::GrpoOptions grpo_options(const std::map<std::string, std::string>& own) {
  rl::GrpoOptions o;
  for (const auto& [name, value] : own) {
    if (rl::read_objective_flag(o.objective, name, value)) continue;
    auto integer = [&] { return models::parse_flag_number<int64_t>(name, value); };
    auto real = [&] { return models::parse_flag_number<double>(name, value); };
    if (name == "prompts") o.prompts = value;
    if (name == "eval-prompts") o.eval_prompts = value;
    if (name == "eval-interval") o.eval_interval = integer();
    if (name == "rollout-batch-size") o.rollout_batch_size = integer();
    if (name == "num-return-sequences-in-group") o.group_size = integer();
    if (name == "response-length") o.response_length = integer();
    if (name == "temperature") o.temperature = real();
    if (name == "top-p") o.top_p = real();
    if (name == "top-k") o.top_k = integer();
    if (name == "rollout-ranks") o.rollout_ranks = static_cast<int>(integer());
    if (name == "kl-coef") o.kl_coef = real();
    if (name == "kl-loss-type") o.kl_estimator = value;
    if (name == "infer-batch-size") o.infer_batch_size = integer();
    if (name == "ppo-micro-batch-size") o.micro_batch_size = integer();
    if (name == "ppo-mini-batch-size") o.mini_batch_size = integer();
    if (name == "gradient-accumulation-steps") o.gradient_accumulation = integer();
    if (name == "ppo-epochs") o.epochs = integer();
    if (name == "weight-sync-chunk-mb") o.sync_chunk_mb = integer();
    if (name == "reference-load") o.reference_load = value;
  }
  return o;
}

bool is_own(const std::string& name) {
  for (const auto& f : own_flags()) {
    if (name == f.name) return true;
  }
  return false;
}

bool given(const std::vector<const char*>& rest, const std::string& name) {
  for (const char* arg : rest) {
    const std::string a = arg;
    if (a == "--" + name || a.rfind("--" + name + "=", 0) == 0) return true;
  }
  return false;
}

// --rl-config-path's keys as flags: own ones into `split.own`, megacpp-train's appended to the rest
// (their text kept in `storage`). A flag given on both sides is refused naming both.
void add_rlvr_config(launch::SplitCommandLine& split, rl::GrpoOptions& options, std::deque<std::string>& storage) {
  const std::string path = split.own.at("rl-config-path");
  const rl::RlvrConfig config = rl::read_rlvr_config(path);
  auto add = [&](const std::string& name, const std::string& value) {
    if (is_own(name)) {
      split.own[name] = value.empty() ? "true" : value;  // "" for a switch
      return;
    }
    split.rest.push_back(storage.emplace_back("--" + name).c_str());
    if (!value.empty()) split.rest.push_back(storage.emplace_back(value).c_str());
  };
  auto on_command_line = [&](const std::string& name) { return is_own(name) ? split.own.count(name) > 0 : given(split.rest, name); };
  for (const auto& [name, value] : config.flags) {
    if (on_command_line(name)) throw std::invalid_argument("--" + name + " is given on the command line and by " + path + "; keep one");
    add(name, value);
  }
  for (const auto& [name, value] : config.defaults) {
    if (!on_command_line(name)) add(name, value);
  }
  if (!config.train_strategy_yaml.empty() && given(split.rest, "fsdp2-config-path")) {
    throw std::invalid_argument("--fsdp2-config-path and actor_train.strategy_args in " + path + " both give the FSDP2 config; keep one");
  }
  options.train_strategy_yaml = config.train_strategy_yaml;
  options.train_strategy_source = config.source;
  options.trainer_ranks = config.trainer_ranks;
  options.experiment = config.experiment;
}

}  // namespace

namespace {

int run(int argc, char** argv) {
  const char* program = "megacpp-grpo";
  try {
    launch::SplitCommandLine split = launch::split_command_line(argc, argv, own_flags());
    if (split.help) {
      launch::print_own_flags("megacpp-grpo: GRPO on prompts with exact answers, the rollout colocated or on ranks of its own",
                              own_flags(),
                              "and megacpp-train's flags for the model, tokenizer, parallelism, weights (--load [--finetune] or "
                              "--init-from-hf-path), --lr, --train-iters (the steps), --save/--save-interval, --seed and --clip-grad "
                              "(megacpp-train --help); data flags may be left out, and those that mean nothing here are refused.");
      return 0;
    }
    rl::GrpoOptions from_config;
    std::deque<std::string> storage;
    if (split.own.count("rl-config-path")) add_rlvr_config(split, from_config, storage);
    launch::refuse_unread_flags(split, unread_flags(), program);
    rl::GrpoOptions options = grpo_options(split.own);
    options.train_strategy_yaml = from_config.train_strategy_yaml;
    options.train_strategy_source = from_config.train_strategy_source;
    options.trainer_ranks = from_config.trainer_ranks;
    options.experiment = from_config.experiment;
    settings::TrainingArguments args = settings::parse_arguments(static_cast<int>(split.rest.size()), split.rest.data());
    if (!given(split.rest, "lr-decay-style")) args.lr_decay_style = "constant";  // verl's default: no decay unless asked for
    if (!given(split.rest, "log-interval")) args.log_interval = 1;                 // ROLL's logging_steps: every step
    runtime::keep_freed_host_memory();  // Note [Host memory]
    std::signal(SIGPIPE, SIG_IGN);       // a peer's closed socket is an error to report, as in megacpp-train
    return rl::run_grpo(std::move(args), options, program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { megacpp::end_process(run(argc, argv)); }
