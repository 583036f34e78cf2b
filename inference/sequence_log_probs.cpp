#include "inference/sequence_log_probs.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/ulysses.h"

namespace megacpp::inference {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The most forwards any rank of `world` runs: each runs that many (Note [Forward-only sharded inference]).
int64_t agreed_forwards(int64_t here, const SequenceScoring& scoring) {
  if (scoring.world.size() <= 1) return here;
  const at::Tensor mine = torch::full({1}, here, torch::dtype(torch::kLong).device(scoring.device));
  const at::Tensor all = torch::empty({scoring.world.size()}, mine.options());
  parallel::all_gather_into_tensor(scoring.world, all, mine).wait();
  return all.max().item<int64_t>();
}

// [batch, n / p] on each rank of `group` -> [batch, n], the slices in rank order.
at::Tensor gather_positions(const at::Tensor& slice, const parallel::Group& group) {
  if (group.size() <= 1 || !slice.defined()) return slice;
  const at::Tensor flat = slice.contiguous().view({-1});
  const at::Tensor all = torch::empty({group.size() * flat.numel()}, flat.options());
  parallel::all_gather_into_tensor(group, all, flat).wait();
  return all.view({group.size(), slice.size(0), slice.size(1)}).permute({1, 0, 2}).reshape({slice.size(0), -1});
}

// One forward over `batch` [b, tokens] (right-padded): the log-probs of its `scored` labels.
TokenLogProbs score_batch(models::LanguageModel& model, const at::Tensor& batch, int64_t scored, const SequenceScoring& scoring) {
  const int64_t p = scoring.cp.size(), multiple = p * scoring.position_multiple;  // one of them is 1
  const int64_t positions = ceil_div(std::max<int64_t>(scored, 1), multiple) * multiple;  // the padding comes last: causal
  at::Tensor input = torch::zeros({batch.size(0), positions}, batch.options());
  at::Tensor labels = torch::zeros_like(input);
  input.narrow(1, 0, scored).copy_(batch.narrow(1, 0, scored));
  labels.narrow(1, 0, scored).copy_(batch.narrow(1, 1, scored));
  if (p > 1) {
    input = parallel::sequence_slice(input, 1, scoring.cp);
    labels = parallel::sequence_slice(labels, 1, scoring.cp);
  }
  const at::Tensor logits = model(input.to(scoring.device));
  TokenLogProbs slice = label_log_probs(logits, labels.to(scoring.device), scoring.temperature, scoring.with_entropy,
                                        scoring.chunk_tokens);
  auto whole = [&](const at::Tensor& t) {
    return t.defined() ? gather_positions(t, scoring.cp).narrow(1, 0, scored).to(torch::kCPU) : t;
  };
  return {whole(slice.log_probs), whole(slice.entropy)};
}

void check_inputs(const at::Tensor& ids, const at::Tensor& lengths, const SequenceScoring& scoring) {
  if (ids.dim() != 2 || ids.scalar_type() != torch::kLong) {
    throw std::invalid_argument("sequence_log_probs: ids must be int64 [sequences, tokens], got " + c10::str(ids.scalar_type(), ids.sizes()));
  }
  if (scoring.batch_size <= 0) throw std::invalid_argument("sequence_log_probs: the batch size (infer_batch_size) must be positive");
  if (!lengths.defined()) return;
  if (lengths.dim() != 1 || lengths.size(0) != ids.size(0)) {
    throw std::invalid_argument("sequence_log_probs: lengths " + c10::str(lengths.sizes()) + " do not match ids " + c10::str(ids.sizes()));
  }
  if (lengths.numel() > 0 && (lengths.min().item<int64_t>() < 1 || lengths.max().item<int64_t>() > ids.size(1))) {
    throw std::invalid_argument("sequence_log_probs: every length must be between 1 and the ids' " + std::to_string(ids.size(1)) + " tokens");
  }
}

}  // namespace

TokenLogProbs sequence_log_probs(models::LanguageModel& model, const at::Tensor& ids, const at::Tensor& lengths,
                                 const SequenceScoring& scoring) {
  check_inputs(ids, lengths, scoring);
  const int64_t n = ids.size(0), scored = std::max<int64_t>(ids.size(1) - 1, 0);
  const at::Tensor length = lengths.defined() ? lengths.to(torch::kLong) : torch::full({n}, ids.size(1), torch::kLong);
  TokenLogProbs result{torch::zeros({n, scored}), scoring.with_entropy ? torch::zeros({n, scored}) : at::Tensor()};
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  const int64_t forwards = agreed_forwards(ceil_div(n, scoring.batch_size), scoring);
  for (int64_t f = 0; f < forwards; ++f) {
    const int64_t first = f * scoring.batch_size;
    if (first >= n) {  // this rank's sequences are done; the others' forwards still need it
      score_batch(model, torch::zeros({1, 2}, torch::kLong), 1, scoring);
      continue;
    }
    const int64_t count = std::min(scoring.batch_size, n - first);
    const int64_t longest = length.narrow(0, first, count).max().item<int64_t>();
    const TokenLogProbs batch = score_batch(model, ids.narrow(0, first, count).narrow(1, 0, longest), longest - 1, scoring);
    result.log_probs.narrow(0, first, count).narrow(1, 0, longest - 1).copy_(batch.log_probs);
    if (scoring.with_entropy) result.entropy.narrow(0, first, count).narrow(1, 0, longest - 1).copy_(batch.entropy);
  }
  model.train(was_training);
  // The root keeps its gathered parameters after forward (no backward follows here): freed.
  if (parallel::fsdp::fsdp_state(model)) parallel::fsdp::reshard(model);
  // Positions past each sequence's end scored padding: 0, as documented.
  const at::Tensor kept = torch::arange(scored).unsqueeze(0) < (length - 1).unsqueeze(1);
  result.log_probs.mul_(kept);
  if (scoring.with_entropy) result.entropy.mul_(kept);
  return result;
}

}  // namespace megacpp::inference
