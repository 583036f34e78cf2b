// Hugging Face interop for the Llama model: config.json <-> LlamaConfig, and weight names.
// A LlamaConfig is exported as LlamaForCausalLM (model_type "llama"), with a sliding window as
// MistralForCausalLM ("mistral"; a Mistral folder without one reads as the Llama model it
// computes), with add_qkv_bias as Qwen2ForCausalLM ("qwen2"), with qk_layernorm as Qwen3ForCausalLM ("qwen3"), with experts as
// Qwen3MoeForCausalLM ("qwen3_moe"); the keys are those of transformers' configs of the same names.
// Our parameter names are HF's without the "model." prefix (lm_head.weight is the same).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "models/llama/llama_config.h"

namespace megacpp::models {

// config.json for `config` with torch_dtype "float32" or "bfloat16" (the dtype of the saved
// weights). Throws std::invalid_argument for another dtype, an invalid config, or
// max_position_embeddings <= 0 (HF needs a number). bos_token_id / eos_token_id are the
// caller's to add when it knows them.
nlohmann::json llama_hf_config(const LlamaConfig& config, const std::string& torch_dtype);

// The LlamaConfig a config.json describes, with transformers' defaults for absent keys.
// Refuses, naming `path_for_errors` and the key, what the model cannot compute the same way:
// another architecture or model_type, rope_scaling / rope_parameters other than default RoPE,
// partial rotary, attention_bias (but for Qwen2's q/k/v biases), mlp_bias, hidden_act other than silu, Qwen's
// per-layer sliding windows (use_sliding_window), attention_dropout, or a shape megacpp cannot build. Throws std::invalid_argument.
LlamaConfig llama_config_from_hf(const nlohmann::json& config, const std::string& path_for_errors);

// "embed_tokens.weight" -> "model.embed_tokens.weight"; "lm_head.weight" stays. Both throw
// std::invalid_argument for a name that is not a weight of a Llama/Mistral/Qwen2/Qwen3 model.
std::string llama_hf_name(const std::string& fqn);
std::string llama_name_from_hf(const std::string& hf_name);

}  // namespace megacpp::models
