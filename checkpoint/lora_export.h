// LoRA adapters out of a checkpoint (Note [LoRA] in models/lora.h): PEFT's adapter folder, or
// merged into the base weights for a plain Hugging Face folder (megacpp-convert export).
#pragma once

#include <map>
#include <string>

#include <ATen/core/Tensor.h>

#include "checkpoint/checkpoint_reader.h"
#include "models/lora.h"
#include "models/model_family.h"

namespace megacpp::checkpoint {

// The LoRA settings the checkpoint's args record (rank 0: none).
models::LoraSettings checkpoint_lora(const CheckpointReader& reader);

// Writes what PEFT's save_pretrained writes for these adapters: adapter_config.json (peft_type
// LORA, task_type CAUSAL_LM, r, lora_alpha, lora_dropout, the Hugging Face names of the adapted
// modules as target_modules, `base_model`, or null, as base_model_name_or_path) and
// adapter_model.safetensors ("base_model.model." + the Hugging Face module + ".lora_A.weight" /
// ".lora_B.weight", in `dtype`). Returns a one-line summary.
std::string export_peft(const CheckpointReader& adapters, const models::ModelConfig& config, const models::LoraSettings& settings,
                        const std::string& output, at::ScalarType dtype, const std::string& base_model);

// Adds each adapter into the weight it adapts: W += alpha / rank * lora_B @ lora_A (`weights`
// by megacpp name, fp32, [out, in]).
void merge_lora(std::map<std::string, at::Tensor>& weights, const CheckpointReader& adapters, const models::ModelConfig& config,
                const models::LoraSettings& settings);

}  // namespace megacpp::checkpoint
