// The independent forward pass of a Hugging Face folder (tests/reference/hf_forward.py:
// NumPy, transformers' Llama / Qwen3 math), for comparing logits with megacpp's.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace megacpp::testing {

// Logits [batch, seq, vocab] of the model in `hf_dir` for `tokens` (batch rows of equal length).
// `script` is the reference that computes them (tests/reference/: hf_forward.py for Llama / Qwen3,
// gpt2_forward.py for GPT-2).
at::Tensor hf_reference_logits(const std::string& hf_dir, const std::vector<std::vector<int64_t>>& tokens, int64_t vocab,
                               const std::string& script = "hf_forward.py");

// Two sequences of 12 token ids below 50, for comparing logits.
const std::vector<std::vector<int64_t>>& reference_tokens();

// megacpp's logits for `tokens` with the model and weights of the checkpoint under `root` (its
// latest iteration), built as its args describe it and run without dropout.
at::Tensor checkpoint_logits(const std::string& root, const std::vector<std::vector<int64_t>>& tokens);

}  // namespace megacpp::testing
