#include "launch/grpo_section.h"

#include <cstdio>
#include <functional>
#include <optional>
#include <type_traits>

#include "models/model_flags.h"

namespace megacpp::launch {
namespace {

using rl::GrpoOptions;
using rl::ObjectiveOptions;

struct GrpoFlag {
  const char* name;
  bool takes_value;
  const char* help;  // "{}" is the default, printed from GrpoOptions{}
  std::function<void(GrpoOptions&, const std::string& value)> read;  // null: main reads it
  std::function<std::string(const GrpoOptions&)> shown;              // the default, for "{}"
};

template <class T>
T parsed(const char* name, const std::string& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else {
    return models::parse_flag_number<T>(name, value);
  }
}

template <class T>
std::string shown_value(const T& value) {
  if constexpr (std::is_same_v<T, double>) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", value);
    return text;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else {
    return std::to_string(value);
  }
}

// A flag with a value into `field` (of GrpoOptions, or of its objective).
template <class T>
GrpoFlag value(const char* name, const char* help, T GrpoOptions::*field) {
  return {name, true, help, [=](GrpoOptions& o, const std::string& v) { o.*field = parsed<T>(name, v); },
          [=](const GrpoOptions& o) { return shown_value(o.*field); }};
}
template <class T>
struct Optional : std::false_type {
  using value_type = T;
};
template <class T>
struct Optional<std::optional<T>> : std::true_type {
  using value_type = T;
};

template <class T>
GrpoFlag objective(const char* name, const char* help, T ObjectiveOptions::*field) {
  return {name, true, help,
          [=](GrpoOptions& o, const std::string& v) {
            if constexpr (std::is_same_v<T, bool>) {
              o.objective.*field = true;  // a switch
            } else {
              o.objective.*field = parsed<typename Optional<T>::value_type>(name, v);
            }
          },
          [=](const GrpoOptions& o) {
            if constexpr (Optional<T>::value) {
              return std::string();  // unset is the default, which the help says in words
            } else {
              return shown_value(o.objective.*field);
            }
          }};
}
GrpoFlag objective_switch(const char* name, const char* help, bool ObjectiveOptions::*field) {
  GrpoFlag flag = objective(name, help, field);
  flag.takes_value = false;
  return flag;
}

const std::vector<GrpoFlag>& table() {
  static const std::vector<GrpoFlag> flags = {
      value("prompts", "JSON lines {\"prompt\": text, \"answer\": text} to train on (required)", &GrpoOptions::prompts),
      value("eval-prompts", "held-out JSON lines of the same kind, answered greedily before, during and after training",
            &GrpoOptions::eval_prompts),
      value("eval-interval", "GRPO steps between held-out evaluations (default {}: before and after only)", &GrpoOptions::eval_interval),
      value("rollout-batch-size", "prompts per step over all trainer ranks (ROLL's rollout_batch_size; default {})",
            &GrpoOptions::rollout_batch_size),
      value("num-return-sequences-in-group", "responses sampled per prompt (ROLL's; verl's rollout.n; default {})", &GrpoOptions::group_size),
      value("response-length", "new tokens per response at most (ROLL's response_length; default {})", &GrpoOptions::response_length),
      value("temperature", "sampling temperature (generating_args; default {})", &GrpoOptions::temperature),
      value("top-p", "nucleus sampling's probability mass (default {})", &GrpoOptions::top_p),
      value("top-k", "sample among the k most likely tokens (default {}: all)", &GrpoOptions::top_k),
      value("rollout-ranks", "the last N ranks generate and take the weights by broadcast (default {}: colocated)", &GrpoOptions::rollout_ranks),
      value("kl-coef", "weight of the KL to the reference in the loss (verl's kl_loss_coef; default {}; 0: no reference)", &GrpoOptions::kl_coef),
      value("kl-loss-type", "KL estimator: kl (k1), abs, mse (k2) or low_var_kl (k3, default)", &GrpoOptions::kl_estimator),
      objective("clip-ratio", "PPO's ratio clip (ROLL's pg_clip; default {})", &ObjectiveOptions::clip_ratio),
      objective("clip-ratio-low", "the ratio's lower clip, 1 - low (verl's clip_ratio_low; default --clip-ratio)", &ObjectiveOptions::clip_ratio_low),
      objective("clip-ratio-high", "the ratio's upper clip, 1 + high (verl's clip_ratio_high, DAPO's clip-higher; default --clip-ratio)",
                &ObjectiveOptions::clip_ratio_high),
      objective("dual-clip-ratio", "negative advantages' loss at most -A x this (verl's clip_ratio_c; default {}; 0: none)",
                &ObjectiveOptions::dual_clip_ratio),
      objective("loss-agg-mode", "token-mean (default), seq-mean-token-sum or seq-mean-token-mean (verl's and ROLL's loss_agg_mode)",
                &ObjectiveOptions::loss_agg_mode),
      objective("importance-sampling", "token (default: each token's ratio) or seq (each response's, its tokens' mean log-ratio; ROLL's)",
                &ObjectiveOptions::importance_sampling),
      objective("entropy-coeff", "minus this x the policy's entropy at the response tokens in the loss (verl's; default {})",
                &ObjectiveOptions::entropy_coeff),
      objective("adv-estimator", "grpo (default: normalized within each prompt's group) or reinforce (ROLL's, normalized as --norm-mean-type and --norm-std-type say)",
                &ObjectiveOptions::adv_estimator),
      objective("norm-mean-type", "with reinforce: subtract the group's or the batch's mean score, or none (default)", &ObjectiveOptions::norm_mean_type),
      objective("norm-std-type", "with reinforce: divide by the group's or the batch's standard deviation, or none (default)",
                &ObjectiveOptions::norm_std_type),
      objective("reward-clip", "clamp the normalized rewards to +-this (ROLL's reward_clip; default {}: none)", &ObjectiveOptions::reward_clip),
      objective_switch("whiten-advantages", "whiten the advantages over the batch's counted tokens (ROLL's whiten_advantages)",
                       &ObjectiveOptions::whiten_advantages),
      objective("advantage-clip", "clamp the advantages to +-this (ROLL's advantage_clip; default {}: none)", &ObjectiveOptions::advantage_clip),
      objective_switch("max-len-mask", "leave out of the loss responses that used every new token (ROLL's max_len_mask)", &ObjectiveOptions::max_len_mask),
      objective_switch("difficulty-mask", "leave out groups whose mean score is not strictly between the thresholds (ROLL's difficulty_mask)",
                       &ObjectiveOptions::difficulty_mask),
      objective("difficulty-low-threshold", "with --difficulty-mask (default 0)", &ObjectiveOptions::difficulty_low),
      objective("difficulty-high-threshold", "with --difficulty-mask (default 1)", &ObjectiveOptions::difficulty_high),
      objective_switch("error-max-len-clip", "keep right responses (score 1) and wrong ones (0) shorter than the threshold (ROLL's)",
                       &ObjectiveOptions::error_max_len_clip),
      objective("error-max-len-threshold", "with --error-max-len-clip (default: no limit)", &ObjectiveOptions::error_max_len_threshold),
      value("infer-batch-size", "sequences per forward of the log-prob passes (ROLL's infer_batch_size; default {})", &GrpoOptions::infer_batch_size),
      value("ppo-micro-batch-size", "responses per forward of the update (verl's ppo_micro_batch_size_per_gpu; default {})",
            &GrpoOptions::micro_batch_size),
      value("ppo-mini-batch-size", "prompts per optimizer step over all data-parallel ranks (verl's ppo_mini_batch_size; default: "
                                   "the rollout batch, one step)",
            &GrpoOptions::mini_batch_size),
      value("gradient-accumulation-steps", "micro-batches per optimizer step on each rank (ROLL's, with per_device_train_batch_size)",
            &GrpoOptions::gradient_accumulation),
      value("ppo-epochs", "passes over each rollout batch (verl's and ROLL's ppo_epochs; default {})", &GrpoOptions::epochs),
      value("weight-sync-chunk-mb", "with --rollout-ranks: MiB per broadcast of the weights (default {})", &GrpoOptions::sync_chunk_mb),
      value("reference-load", "the reference's checkpoint (default: --load's, or --init-from-hf-path's folder)", &GrpoOptions::reference_load),
      {"rl-config-path", true, "ROLL's RLVR YAML (actor_train / actor_infer / reference, generating_args, ...): its keys are read as "
                               "the flags they mean; a flag given on the command line too is an error",
       nullptr, nullptr},
  };
  return flags;
}

}  // namespace

const std::vector<OwnFlag>& grpo_flags() {
  static const std::vector<std::string> helps = [] {
    const GrpoOptions defaults;
    std::vector<std::string> out;
    for (const auto& flag : table()) {
      std::string help = flag.help;
      if (const size_t at = help.find("{}"); at != std::string::npos) help.replace(at, 2, flag.shown(defaults));
      out.push_back(help);
    }
    return out;
  }();
  static const std::vector<OwnFlag> flags = [] {
    std::vector<OwnFlag> out;
    for (size_t i = 0; i < table().size(); ++i) out.push_back({table()[i].name, table()[i].takes_value, helps[i].c_str()});
    return out;
  }();
  return flags;
}

rl::GrpoOptions read_grpo_flags(const std::map<std::string, std::string>& given) {
  GrpoOptions o;
  for (const auto& flag : table()) {
    const auto it = given.find(flag.name);
    if (it != given.end() && flag.read) flag.read(o, it->second);
  }
  return o;
}

const std::vector<UnreadFlag>& grpo_unread_flags() {
  static const char* const kSteps = "a step takes --rollout-batch-size prompts and --num-return-sequences-in-group responses to each";
  static const char* const kUpdates = "its schedule counts optimizer steps: --lr-warmup-iters, --lr-decay-iters";
  static const char* const kNoScaling = "megacpp-grpo does not scale the loss, which fp16 needs; use --bf16";
  static const char* const kPrompts = "the prompts are the data: --prompts";
  static const std::vector<UnreadFlag> flags = {
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

}  // namespace megacpp::launch
