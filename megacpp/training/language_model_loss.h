// The training objective of a language model.
#pragma once

#include <ATen/core/Tensor.h>

#include "models/language_model.h"

namespace megacpp::training {

// Cross-entropy of next-token prediction on one micro-batch of tokens [micro, seq + 1]: the
// model reads the first seq_length tokens and is scored on the next ones.
at::Tensor language_model_loss(models::LanguageModel& model, const at::Tensor& tokens, int64_t seq_length);

}  // namespace megacpp::training
