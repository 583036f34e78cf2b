#include "training/step/language_model_loss.h"

#include <optional>

#include <torch/torch.h>

#include "models/kernels/cross_entropy_kernel.h"
#include "models/kernels/fusion.h"
#include "parallel/collectives.h"
#include "parallel/ulysses.h"
#include "parallel/vocab_parallel.h"

namespace megacpp::training::step {

namespace {

// How many of `labels` a loss counts: where the mask keeps one, or every one without a mask.
at::Tensor count_of_labels(const at::Tensor& mask, int64_t labels) {
  return mask.defined() ? mask.gt(0).sum().to(torch::kDouble) : torch::scalar_tensor(static_cast<double>(labels), torch::kDouble);
}

// Per label, in fp32 (Note [Fused kernels]: the fused kernel reads bf16 logits as they are):
// logits [labels, vocab], or with a vocab group of p > 1 ranks this rank's [labels, vocab / p].
at::Tensor cross_entropy_per_label(const at::Tensor& logits, const at::Tensor& labels, const parallel::Group& vocab) {
  if (vocab.size() > 1) return parallel::vocab_parallel_cross_entropy(logits, labels, vocab);
  if (models::kernels::kernel_fusion().cross_entropy && models::kernels::fusable(logits)) {
    return models::kernels::fused_cross_entropy(logits, labels);
  }
  return torch::cross_entropy_loss(logits.to(torch::kFloat), labels, {}, at::Reduction::None);
}

}  // namespace

int64_t counted_labels(const data::MicroBatch& batch) {
  const int64_t seq_length = batch.tokens.size(1) - 1;
  const at::Tensor mask = batch.loss_mask.defined() ? batch.loss_mask.narrow(1, 0, seq_length) : at::Tensor();
  return count_of_labels(mask, batch.tokens.size(0) * seq_length).item<int64_t>();
}

LabelLoss summed_language_model_loss(models::LanguageModel& model, const data::MicroBatch& batch, const parallel::Group& cp,
                                     const parallel::Group& vocab) {
  const int64_t seq_length = batch.tokens.size(1) - 1;
  at::Tensor input = batch.tokens.narrow(1, 0, seq_length), labels = batch.tokens.narrow(1, 1, seq_length);
  at::Tensor mask = batch.loss_mask.defined() ? batch.loss_mask.narrow(1, 0, seq_length) : at::Tensor();
  if (cp.size() > 1) {
    TORCH_CHECK(!batch.images.defined(), "Ulysses sequence parallelism does not take images");
    input = parallel::sequence_slice(input, 1, cp);
    labels = parallel::sequence_slice(labels, 1, cp);
    if (mask.defined()) mask = parallel::sequence_slice(mask, 1, cp);
  }
  const bool packed = batch.position_ids.defined() || batch.document_ids.defined();
  // The positions and documents are over the whole sequence (Note [Packed documents]).
  parallel::Module::Tensors inputs{input, batch.images};
  if (packed || model.loss_chunk_size() > 0) inputs.insert(inputs.end(), {batch.position_ids, batch.document_ids});
  LabelLoss result;
  result.labels = count_of_labels(mask, labels.numel());
  if (model.loss_chunk_size() > 0) {  // the model sums the loss (Note [Chunked loss])
    inputs.push_back(labels);
    inputs.push_back(mask.defined() ? mask.gt(0) : mask);
    result.sum = model(inputs)[0];
    return result;
  }
  std::optional<parallel::KeepLogitsSplit> split_by_vocabulary;
  if (vocab.size() > 1) split_by_vocabulary.emplace();
  // [micro, seq, vocab / p]
  at::Tensor logits = batch.images.defined() || packed ? model(inputs)[0] : model(input);
  logits = logits.reshape({-1, model.vocab_size() / vocab.size()});
  const at::Tensor per_label = cross_entropy_per_label(logits, labels.reshape({-1}), vocab);
  result.sum = mask.defined() ? (per_label * mask.reshape({-1})).sum() : per_label.sum();
  return result;
}

at::Tensor language_model_loss(models::LanguageModel& model, const data::MicroBatch& batch, const parallel::Group& cp,
                               const parallel::Group& vocab) {
  LabelLoss loss = summed_language_model_loss(model, batch, cp, vocab);
  at::Tensor count = loss.labels.to(loss.sum.device());
  // The mean over the counted labels of the whole sequences (summed over the Ulysses group).
  if (cp.size() > 1) parallel::all_reduce(cp, count, parallel::ReduceOp::kSum).wait();
  return loss.sum / count.clamp_min(1.0).to(loss.sum.scalar_type());
}

}  // namespace megacpp::training::step
