// The training objective of a language model.
#pragma once

#include <ATen/core/Tensor.h>

#include "megacpp/training/training_data.h"
#include "models/language_model.h"

namespace megacpp::training {

// Cross-entropy of next-token prediction on one micro-batch of tokens [micro, seq + 1]: the
// model reads the first seq_length tokens (and the images, when the batch has them) and is scored
// on the next ones: the mean over the labels its loss mask counts (Megatron's
// sum(loss * mask) / sum(mask)), over all of them without a mask.
at::Tensor language_model_loss(models::LanguageModel& model, const MicroBatch& batch, int64_t seq_length);

}  // namespace megacpp::training
