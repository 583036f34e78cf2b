// Per-token log-probabilities and entropies of given sequences under a language model: what
// ROLL's fsdp2_infer reference and verl's compute_log_prob return, and what a policy-gradient
// loss differentiates. The logits at position t score token t + 1, so a sequence of n tokens
// has n - 1 of each. Logits are divided by the sampling temperature first (verl's
// logits.div_(temperature)), so that the log-probs are those of the distribution sampled from.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace megacpp::inference {

struct TokenLogProbs {
  at::Tensor log_probs;  // [batch, seq - 1] fp32: log p(ids[b, t + 1] | ids[b, :t + 1])
  at::Tensor entropy;    // [batch, seq - 1] fp32, or undefined when not asked for
};

// From `logits` [batch, seq, vocab] (any floating dtype) and `ids` [batch, seq] int64, in fp32,
// `chunk_tokens` positions at a time so that no fp32 copy of all the logits exists at once.
// Differentiable in the logits. Throws std::invalid_argument naming the shapes or a scored token
// id (ids[:, 1:]) outside the vocabulary.
TokenLogProbs token_log_probs(const at::Tensor& logits, const at::Tensor& ids, double temperature = 1.0,
                              bool with_entropy = true, int64_t chunk_tokens = 1024);

// The same without the shift: `logits` [batch, n, vocab] at the positions that score `labels`
// [batch, n] (a Ulysses rank's slice of each sequence, whose labels start in the next slice).
TokenLogProbs label_log_probs(const at::Tensor& logits, const at::Tensor& labels, double temperature = 1.0,
                              bool with_entropy = true, int64_t chunk_tokens = 1024);

}  // namespace megacpp::inference
