// Note [Generation]
// Rollout's generation, as vLLM samples for verl and ROLL: a batch of prompts (token ids of any
// lengths) continued token by token until each row's stop token or its length limit. Prompts of
// other lengths are padded on the left and kept apart as a document of their own, their
// positions counted from their first token (Note [Packed documents]), so a row's tokens are
// those it would get alone. With a KV cache (Note [KV cache]) the prompts are read once and
// each step reads one token per row; without, each step runs the whole sequence again (the
// reference the cache is checked against). Each step's logits are divided by the temperature,
// cut to the top_k most likely tokens and then to the smallest set whose probability reaches
// top_p, and sampled with the seeded generator (on the CPU, so a seed gives the same tokens on
// any device); temperature 0 takes the most likely token (greedy, ties to the lowest id).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "models/language_model.h"

namespace megacpp::inference {

struct Sampling {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // <= 0: every token (vLLM's -1)
  double top_p = 1.0;        // in (0, 1]
  uint64_t seed = 0;
  int64_t max_new_tokens = 64;
  int64_t max_length = 0;         // prompt and generated tokens of a row at most (the context); 0: no limit
  std::vector<int64_t> stop;      // a row ends with the first of these it generates (kept, as verl keeps EOS)
  int64_t vocabulary = 0;         // ids >= this (the padded vocabulary's rest) are never generated; 0: all
  bool kv_cache = true;
  // Also ends a row when it says so of the row's tokens so far (a multi-token end of turn, as
  // vLLM's stop strings); the row's last token is then kept, as a stop token is.
  std::function<bool(const std::vector<int64_t>& tokens)> finished;
};

struct Generation {
  std::vector<int64_t> tokens;  // the generated ones, the stop token last when one ended the row
  bool stopped = false;         // ended by a stop token or by `finished` (else by a length limit)
};

// Continues each prompt (non-empty, ids inside the logits). The model runs in eval mode, without
// gradients, and is left in the mode it was in; it must not be sharded by Ulysses. Throws
// std::invalid_argument naming the setting at fault (a KV cache for a model that keeps none,
// prompts of several lengths for one that takes no documents, a prompt at the context limit).
std::vector<Generation> generate(models::LanguageModel& model, const std::vector<std::vector<int64_t>>& prompts,
                                 const Sampling& sampling);

// One sampling step: the next token of each row of `logits` [rows, vocab] (any floating dtype,
// any device) by `sampling`'s temperature, top_k, top_p and vocabulary, drawn with `generator`
// (a CPU generator). Returns int64 [rows] on the CPU.
at::Tensor sample_tokens(const at::Tensor& logits, const Sampling& sampling, at::Generator& generator);

}  // namespace megacpp::inference
