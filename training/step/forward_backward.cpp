#include "training/step/forward_backward.h"

#include <algorithm>

#include <torch/torch.h>

#include "training/step/language_model_loss.h"
#include "parallel/collectives.h"
#include "parallel/fsdp/fully_shard.h"

namespace megacpp::training::step {
namespace {

// The labels of the whole global batch under --calculate-per-token-loss: every rank's
// micro-batches, the sequences of a Ulysses or TP group counted once (its ranks read the same ones).
double global_batch_labels(const std::vector<data::MicroBatch>& micro_batches, const ForwardBackwardSetup& setup) {
  int64_t local = 0;
  for (const data::MicroBatch& batch : micro_batches) local += counted_labels(batch);
  const double summed = parallel::average_over_ranks(setup.world, static_cast<double>(local), setup.device) * setup.world.size();
  return std::max(1.0, summed * setup.data_parallel_size / setup.world.size());
}

}  // namespace

ForwardBackwardResult forward_backward(models::LanguageModel& model, const std::vector<data::MicroBatch>& micro_batches,
                                       const ForwardBackwardSetup& setup,
                                       const std::function<void(int64_t)>& before_micro_batch) {
  ForwardBackwardResult result;
  const auto count = static_cast<int64_t>(micro_batches.size());
  const double backward_scale = setup.loss_scale / static_cast<double>(count);
  const double group = static_cast<double>(setup.cp.size());
  model.set_auxiliary_loss_scale(backward_scale / group);
  // Per token: each rank backpropagates its summed loss over the global batch's labels, times
  // the data-parallel size that the engine's gradient reduction divides by again.
  const double labels = setup.per_token_loss ? global_batch_labels(micro_batches, setup) : 0.0;
  for (int64_t m = 0; m < count; ++m) {
    if (before_micro_batch) before_micro_batch(m);
    const data::MicroBatch batch = micro_batches[m].to(setup.device);
    if (setup.fsdp) parallel::fsdp::set_requires_gradient_sync(model, m == count - 1);
    const at::Tensor loss = setup.per_token_loss ? summed_language_model_loss(model, batch, setup.cp, setup.vocab).sum
                                                 : language_model_loss(model, batch, setup.cp, setup.vocab);
    const std::vector<models::AuxiliaryLoss> auxiliary = model.auxiliary_losses();
    if (result.auxiliary.empty()) {
      for (const auto& a : auxiliary) result.auxiliary.push_back({a.name, 0.0});
    }
    for (size_t i = 0; i < auxiliary.size(); ++i) result.auxiliary[i].value += auxiliary[i].value;
    if (setup.per_token_loss) {
      (loss * (setup.loss_scale * setup.data_parallel_size / labels)).backward();
      // A TP group's ranks each hold the whole loss, a Ulysses group's ranks a share of it.
      result.mean_loss += loss.item<double>() * setup.data_parallel_size * group / labels;
    } else {
      (loss * backward_scale).backward();
      result.mean_loss += loss.item<double>() * group;
    }
  }
  // sums first: the same figure as one rank's accumulation
  if (!setup.per_token_loss) result.mean_loss /= static_cast<double>(count);
  for (auto& a : result.auxiliary) a.value /= static_cast<double>(count);
  return result;
}

}  // namespace megacpp::training::step
