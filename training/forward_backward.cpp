#include "training/forward_backward.h"

#include <torch/torch.h>

#include "training/language_model_loss.h"
#include "parallel/fsdp/fully_shard.h"

namespace megacpp::training {

ForwardBackwardResult forward_backward(models::LanguageModel& model, const std::vector<MicroBatch>& micro_batches,
                                       const ForwardBackwardSetup& setup,
                                       const std::function<void(int64_t)>& before_micro_batch) {
  ForwardBackwardResult result;
  const auto count = static_cast<int64_t>(micro_batches.size());
  const double backward_scale = setup.loss_scale / static_cast<double>(count);
  const double group = static_cast<double>(setup.ulysses.size());
  model.set_auxiliary_loss_scale(backward_scale / group);
  for (int64_t m = 0; m < count; ++m) {
    if (before_micro_batch) before_micro_batch(m);
    const MicroBatch batch = micro_batches[m].to(setup.device);
    if (setup.fsdp) parallel::fsdp::set_requires_gradient_sync(model, m == count - 1);
    at::Tensor loss = language_model_loss(model, batch, setup.ulysses);
    const std::vector<models::AuxiliaryLoss> auxiliary = model.auxiliary_losses();
    if (result.auxiliary.empty()) {
      for (const auto& a : auxiliary) result.auxiliary.push_back({a.name, 0.0});
    }
    for (size_t i = 0; i < auxiliary.size(); ++i) result.auxiliary[i].value += auxiliary[i].value;
    (loss * backward_scale).backward();
    result.mean_loss += loss.item<double>() * group;
  }
  result.mean_loss /= static_cast<double>(count);  // sums first: the same figure as one rank's accumulation
  for (auto& a : result.auxiliary) a.value /= static_cast<double>(count);
  return result;
}

}  // namespace megacpp::training
