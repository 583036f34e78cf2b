// Note [LoRA]
// PEFT's LoRA on any model: apply_lora gives every Linear whose module path a target names an
// adapter (Linear::add_lora: lora_A, lora_B; y += lora_B(lora_A(dropout(x))) * alpha / rank) and
// freezes every other parameter (requires_grad false), before the model is sharded. Under FSDP2
// the frozen base weights are gathered for compute like any parameter but never reduced, and
// hold no gradient and no optimizer state; the adapters are sharded and trained as usual.
// Targets are matched as PEFT matches a list of target_modules: a module whose path is the
// target or ends with "." + target ("q_proj" names layers.N.self_attn.q_proj); "all-linear"
// names every Linear but the output layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/language_model.h"
#include "models/layers/linear.h"

namespace megacpp::models {

struct LoraSettings {
  int64_t rank = 0;  // 0: no LoRA (--lora-rank)
  double alpha = 32.0;  // --lora-alpha: the adapter's output is scaled by alpha / rank
  double dropout = 0.0;  // --lora-dropout: on the adapter's input, in training
  std::vector<std::string> target_modules;  // --lora-target-modules (PEFT's names)
};

// Adds the adapters and freezes the rest, for settings as the flags (settings/arguments) or a
// checkpoint's args (lora_settings_from_args) give them, which check them: rank > 0, alpha > 0,
// dropout in [0, 1), some target. Returns the adapted module paths (in module order).
// Throws std::invalid_argument naming the target that matches no Linear (listing the model's
// Linear names) or a module that is not a Linear.
std::vector<std::string> apply_lora(LanguageModel& model, const LoraSettings& settings);

// The settings as a checkpoint's args record them, under MindSpeed-LLM's names (lora_r,
// lora_alpha, lora_dropout, lora_target_modules); nothing for rank 0.
void add_lora_args(const LoraSettings& settings, nlohmann::json& args);
// The settings a checkpoint's args record (rank 0 when they record none); `where` names the
// checkpoint in errors.
LoraSettings lora_settings_from_args(const nlohmann::json& args, const std::string& where);

// PEFT's disable_adapter(): while it lives, no LoRA adapter of `model` adds to its layer's
// output, so the model computes its base model's forward (verl's reference for a LoRA actor);
// the adapters are back when it goes. Every rank of a sharded model must hold one alike.
class AdaptersDisabled {
 public:
  explicit AdaptersDisabled(LanguageModel& model);
  ~AdaptersDisabled();
  AdaptersDisabled(const AdaptersDisabled&) = delete;
  AdaptersDisabled& operator=(const AdaptersDisabled&) = delete;

 private:
  std::vector<Linear*> adapted_;
};

// Whether `name` (a parameter's path) is a LoRA adapter's: "...lora_A.weight" / "...lora_B.weight".
bool is_lora_parameter(const std::string& name);
// The Linear weight a LoRA parameter adapts: "x.lora_A.weight" -> "x.weight".
std::string lora_base_weight(const std::string& lora_name);


}  // namespace megacpp::models
