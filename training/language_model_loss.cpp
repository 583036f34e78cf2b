#include "training/language_model_loss.h"

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/ulysses.h"

namespace megacpp::training {

at::Tensor language_model_loss(models::LanguageModel& model, const MicroBatch& batch, const parallel::Group& ulysses) {
  const int64_t seq_length = batch.tokens.size(1) - 1;
  at::Tensor input = batch.tokens.narrow(1, 0, seq_length), labels = batch.tokens.narrow(1, 1, seq_length);
  at::Tensor mask = batch.loss_mask.defined() ? batch.loss_mask.narrow(1, 0, seq_length) : at::Tensor();
  const bool split = ulysses.size() > 1;
  if (split) {
    TORCH_CHECK(!batch.images.defined(), "Ulysses sequence parallelism does not take images");
    input = parallel::sequence_slice(input, 1, ulysses);
    labels = parallel::sequence_slice(labels, 1, ulysses);
    if (mask.defined()) mask = parallel::sequence_slice(mask, 1, ulysses);
  }
  const int64_t tokens = batch.tokens.size(0) * seq_length;  // over the whole sequences
  const bool packed = batch.position_ids.defined() || batch.document_ids.defined();
  // The positions and documents are over the whole sequence (Note [Packed documents]).
  parallel::Module::Tensors inputs{input, batch.images};
  if (packed || model.loss_chunk_size() > 0) inputs.insert(inputs.end(), {batch.position_ids, batch.document_ids});
  // The mean over the counted labels: of the whole sequences (summed over the Ulysses group).
  auto per_label = [&](const at::Tensor& sum) {
    if (!mask.defined()) return sum / static_cast<double>(tokens);
    at::Tensor count = mask.sum();
    if (split) parallel::all_reduce(ulysses, count, parallel::ReduceOp::kSum).wait();
    return sum / count.clamp_min(1.0);
  };
  if (model.loss_chunk_size() > 0) {  // the model sums the loss (Note [Chunked loss])
    inputs.push_back(labels);
    inputs.push_back(mask.defined() ? mask.gt(0) : mask);
    return per_label(model(inputs)[0]);
  }
  // [micro, seq, vocab]
  at::Tensor logits = batch.images.defined() || packed ? model(inputs)[0] : model(input);
  logits = logits.to(torch::kFloat).view({-1, model.vocab_size()});
  labels = labels.reshape({-1});
  if (!mask.defined() && !split) return torch::cross_entropy_loss(logits, labels);
  if (!mask.defined()) return per_label(torch::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum));
  const at::Tensor losses = torch::cross_entropy_loss(logits, labels, {}, at::Reduction::None);
  return per_label((losses * mask.reshape({-1})).sum());
}

}  // namespace megacpp::training
