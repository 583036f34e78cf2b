#include "megacpp/training/language_model_loss.h"

#include <torch/torch.h>

namespace megacpp::training {

at::Tensor language_model_loss(models::LanguageModel& model, const at::Tensor& tokens, int64_t seq_length) {
  at::Tensor input = tokens.narrow(1, 0, seq_length), labels = tokens.narrow(1, 1, seq_length);
  at::Tensor logits = model(input);  // [micro, seq, vocab]
  return torch::cross_entropy_loss(logits.to(torch::kFloat).view({-1, model.vocab_size()}), labels.reshape({-1}));
}

}  // namespace megacpp::training
