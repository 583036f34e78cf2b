// The loss of Megatron's evaluate(): accumulated over the validation micro-batches, then ranks.
#pragma once

#include <ATen/core/Tensor.h>

#include "training/data/training_data.h"
#include "models/language_model.h"
#include "parallel/group.h"

namespace megacpp::training::step {

class EvaluationLoss {
 public:
  // per_token: --calculate-per-token-loss (the summed loss over the summed count of labels);
  // otherwise the mean of the micro-batches' losses (Megatron's default). The groups split each
  // sequence and the vocabulary (language_model_loss).
  EvaluationLoss(bool per_token, parallel::Group cp, parallel::Group vocab)
      : per_token_(per_token), cp_(std::move(cp)), vocab_(std::move(vocab)) {}

  // One micro-batch, scored without gradients.
  void add(models::LanguageModel& model, const data::MicroBatch& batch);

  // Over every rank's micro-batches. Collective over `world`.
  double value(const parallel::Group& world, const c10::Device& device) const;

 private:
  bool per_token_;
  parallel::Group cp_;
  parallel::Group vocab_;
  double sum_ = 0;     // losses (per micro-batch means, or sums per token)
  double labels_ = 0;  // per token: the counted labels; otherwise the micro-batches
};

}  // namespace megacpp::training::step
