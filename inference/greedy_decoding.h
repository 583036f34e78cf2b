// Greedy decoding: the most likely next token again and again, for a batch of prompts of one
// length, with the model in eval mode and no gradients (the caller's NoGradGuard).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "models/language_model.h"

namespace megacpp::inference {

struct GreedyDecoding {
  int64_t vocabulary = 0;            // ids >= this (the padded vocabulary's rest) never win
  std::vector<int64_t> banned;       // ids that never win (an image token, which would ask for an image)
  std::vector<int64_t> stop;         // a row ends at the first of these (not kept in its output)
  int64_t max_length = 0;            // prompt and output tokens in all
  // Also ends a row when it says so of the row's output so far (a multi-token end of turn).
  std::function<bool(const std::vector<int64_t>& generated)> finished;
};

// The tokens after each row of `prompt` [rows, length] until it stops or the rows reach
// `max_length`; `extra` is the model's second input (images), undefined for text. An ended row
// goes on with its stop token so that the rows stay one batch. With `left_padding` (one count
// per row) prompts of other lengths share the batch: the first left_padding[r] tokens of row r
// are padding, which a model that takes packed documents (Note [Packed documents]) keeps apart
// as a document of its own, the prompt's positions counted from its first token.
std::vector<std::vector<int64_t>> continue_greedily(models::LanguageModel& model, at::Tensor prompt, const at::Tensor& extra,
                                                    const GreedyDecoding& how, const std::vector<int64_t>& left_padding = {});

}  // namespace megacpp::inference
