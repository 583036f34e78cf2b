#include "training/step/evaluation_loss.h"

#include <torch/torch.h>

#include "training/step/language_model_loss.h"
#include "parallel/collectives.h"

namespace megacpp::training::step {

void EvaluationLoss::add(models::LanguageModel& model, const data::MicroBatch& batch) {
  if (per_token_) {
    const LabelLoss loss = summed_language_model_loss(model, batch, cp_, vocab_);
    sum_ += loss.sum.item<double>();
    labels_ += loss.labels.item<double>();
  } else {  // with Ulysses, this rank's share times the group size (Note [Ulysses])
    sum_ += language_model_loss(model, batch, cp_, vocab_).item<double>() * cp_.size();
    labels_ += 1;
  }
}

double EvaluationLoss::value(const parallel::Group& world, const c10::Device& device) const {
  if (!per_token_) return parallel::average_over_ranks(world, labels_ > 0 ? sum_ / labels_ : 0.0, device);
  // The summed losses and their labels over every rank, in one all-reduce.
  at::Tensor totals = torch::tensor({sum_, labels_}, torch::TensorOptions(torch::kDouble)).to(device);
  parallel::all_reduce(world, totals, parallel::ReduceOp::kSum).wait();
  const double sum = totals[0].item<double>(), labels = totals[1].item<double>();
  return labels > 0 ? sum / labels : 0.0;
}

}  // namespace megacpp::training::step
