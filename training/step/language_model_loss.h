// The training objective of a language model.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "training/data/training_data.h"
#include "models/language_model.h"
#include "parallel/group.h"

namespace megacpp::training::step {

// Cross-entropy of next-token prediction on one micro-batch of tokens [micro, seq + 1] (seq is
// --seq-length, or less for a micro-batch cut to its longest sample): the model reads the first seq tokens (and the images, when the batch has them) and is scored
// on the next ones: the mean over the labels its loss mask counts (Megatron's
// sum(loss * mask) / sum(mask)), over all of them without a mask.
//
// With a Ulysses group of p > 1 ranks (Note [Ulysses]), inputs and labels are shifted on the
// whole sequence and this rank takes its slice of both: the model reads seq_length / p tokens
// and the result is this rank's share, the sum over its labels divided by the count over the
// whole sequences (summed over the group), so that the group's shares add up to the loss above.
//
// With a `vocab` group of p > 1 ranks (tensor parallelism, Note [Vocabulary parallelism]) the
// model's logits stay each rank's slice of the vocabulary and the loss, the same on every rank of
// the group, is their vocabulary-parallel cross-entropy.
at::Tensor language_model_loss(models::LanguageModel& model, const data::MicroBatch& batch, const parallel::Group& cp,
                               const parallel::Group& vocab = parallel::Group::single(0));

// The sum behind that mean: this rank's loss summed over the labels it scores (its slice with
// Ulysses), and how many labels those are (a double tensor). Megatron's
// --calculate-per-token-loss divides such sums by the count over the whole global batch.
struct LabelLoss {
  at::Tensor sum;
  at::Tensor labels;
};
LabelLoss summed_language_model_loss(models::LanguageModel& model, const data::MicroBatch& batch, const parallel::Group& cp,
                                     const parallel::Group& vocab = parallel::Group::single(0));

// The labels a micro-batch's loss counts, over its whole sequences (what its loss mask keeps).
int64_t counted_labels(const data::MicroBatch& batch);

}  // namespace megacpp::training::step
