#include "megacpp/training/language_model_loss.h"

#include <torch/torch.h>

namespace megacpp::training {

at::Tensor language_model_loss(models::LanguageModel& model, const MicroBatch& batch, int64_t seq_length) {
  at::Tensor input = batch.tokens.narrow(1, 0, seq_length), labels = batch.tokens.narrow(1, 1, seq_length);
  // [micro, seq, vocab]
  at::Tensor logits = batch.images.defined() ? model(parallel::Module::Tensors{input, batch.images})[0] : model(input);
  logits = logits.to(torch::kFloat).view({-1, model.vocab_size()});
  if (!batch.loss_mask.defined()) return torch::cross_entropy_loss(logits, labels.reshape({-1}));
  const at::Tensor mask = batch.loss_mask.narrow(1, 0, seq_length).reshape({-1});
  const at::Tensor losses = torch::cross_entropy_loss(logits, labels.reshape({-1}), {}, at::Reduction::None);
  return (losses * mask).sum() / mask.sum().clamp_min(1.0);
}

}  // namespace megacpp::training
