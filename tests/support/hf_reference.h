// The independent forward pass of a Hugging Face folder (tests/reference/hf_forward.py:
// NumPy, transformers' Llama / Qwen3 math), for comparing logits with megacpp's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "models/language_model.h"
#include "models/model_family.h"

namespace torch::nn {
class Module;
}

namespace megacpp::testing {

// Logits [batch, seq, vocab] of the model in `hf_dir` for `tokens` (batch rows of equal length).
// `script` is the reference that computes them (tests/reference/: hf_forward.py for Llama / Qwen3,
// gpt2_forward.py for GPT-2).
// With `load_balancing_loss` (hf_forward.py, Qwen3-MoE), also transformers' load-balancing loss;
// with `peft_dir` (hf_forward.py), the model runs with that PEFT LoRA adapter folder.
at::Tensor hf_reference_logits(const std::string& hf_dir, const std::vector<std::vector<int64_t>>& tokens, int64_t vocab,
                               const std::string& script = "hf_forward.py", double* load_balancing_loss = nullptr,
                               const std::string& peft_dir = "");

// Draws every norm weight (q_norm, k_norm included) from U(0.5, 1.5) and every bias from
// U(-0.5, 0.5) with generator seed `seed`, where initialization gives 1 and 0: a misplaced norm
// or bias then shows in the logits. The same full values on every rank, sharded or not.
void draw_norms_and_biases(torch::nn::Module& model, uint64_t seed);

// Writes the Hugging Face folder of a model of `config` with the full fp32 parameters
// `full_params` (megacpp names): config.json and safetensors under the family's names, several
// shards and an index when they pass `max_shard_bytes`.
void write_hf_folder(const std::string& dir, const models::ModelConfig& config, const std::map<std::string, at::Tensor>& full_params,
                     uint64_t max_shard_bytes);

// A Qwen2-style tiny model (testing::tiny_llama untied, with q/k/v biases), seeded, its norms
// and biases drawn, written as a Hugging Face folder at `dir` (created), in shards of at most
// `max_shard_bytes`.
void write_qwen2_folder(const std::string& dir, uint64_t max_shard_bytes);

// Two sequences of 12 token ids below 50, for comparing logits.
const std::vector<std::vector<int64_t>>& reference_tokens();
// `tokens` (rows of equal length) as an int64 tensor [batch, seq], a model's input.
at::Tensor token_ids(const std::vector<std::vector<int64_t>>& tokens);

// megacpp's logits for `tokens` with the model and weights of the checkpoint under `root` (its
// latest iteration), built as its args describe it (LoRA adapters included) and run without
// dropout; with `auxiliary`, the model's auxiliary losses of that forward too. Weights `root`
// does not hold (a LoRA base saved apart) come from the checkpoint under `base_root`. `images`
// (pixel values) go to a vision-language model with the tokens.
at::Tensor checkpoint_logits(const std::string& root, const std::vector<std::vector<int64_t>>& tokens,
                             std::vector<models::AuxiliaryLoss>* auxiliary = nullptr, const std::string& base_root = "",
                             const at::Tensor& images = at::Tensor());

// tests/reference/llava_forward.py's logits [batch, seq, vocab] for the LLaVA folder `hf_dir`,
// `tokens` and `pixels` [images, channels, size, size].
at::Tensor llava_reference_logits(const std::string& hf_dir, const std::vector<std::vector<int64_t>>& tokens, const at::Tensor& pixels,
                                  int64_t vocab);

}  // namespace megacpp::testing
