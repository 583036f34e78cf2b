#include "inference/token_log_probs.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace megacpp::inference {
namespace {

std::string shape(const at::Tensor& t) { return c10::str(t.sizes()); }

// Shapes, dtypes and temperature; with `id_range`, every id inside the vocabulary (a sync: once
// per call, by label_log_probs, which token_log_probs ends in).
void check_inputs(const at::Tensor& logits, const at::Tensor& ids, double temperature, bool id_range) {
  if (logits.dim() != 3 || ids.dim() != 2 || logits.size(0) != ids.size(0) || logits.size(1) != ids.size(1)) {
    throw std::invalid_argument("token_log_probs: logits " + shape(logits) + " and ids " + shape(ids) +
                                " are not [batch, seq, vocab] and [batch, seq] of one batch and length");
  }
  if (!at::isFloatingType(logits.scalar_type())) throw std::invalid_argument("token_log_probs: logits must be floating point");
  if (ids.scalar_type() != at::kLong) throw std::invalid_argument("token_log_probs: ids must be int64");
  if (!(temperature > 0)) throw std::invalid_argument("token_log_probs: the temperature must be positive, got " + std::to_string(temperature));
  if (!id_range || ids.numel() == 0) return;
  const int64_t low = ids.min().item<int64_t>(), high = ids.max().item<int64_t>();
  if (low < 0 || high >= logits.size(2)) {
    throw std::invalid_argument("token_log_probs: token id " + std::to_string(low < 0 ? low : high) +
                                " is outside the vocabulary of " + std::to_string(logits.size(2)) + " logits");
  }
}

}  // namespace

TokenLogProbs label_log_probs(const at::Tensor& logits, const at::Tensor& labels, double temperature, bool with_entropy,
                              int64_t chunk_tokens) {
  check_inputs(logits, labels, temperature, /*id_range=*/true);
  if (chunk_tokens <= 0) throw std::invalid_argument("token_log_probs: chunk_tokens must be positive");
  const int64_t batch = labels.size(0), scored = labels.size(1), vocab = logits.size(2);
  const at::Tensor rows = logits.reshape({-1, vocab});  // [batch * n, vocab] beside their labels
  const at::Tensor next = labels.reshape({-1, 1}).to(logits.device());
  std::vector<at::Tensor> log_probs, entropies;
  for (int64_t start = 0; start < rows.size(0); start += chunk_tokens) {
    const int64_t n = std::min(chunk_tokens, rows.size(0) - start);
    at::Tensor scaled = rows.narrow(0, start, n).to(torch::kFloat);
    if (temperature != 1.0) scaled = scaled / temperature;
    const at::Tensor log_p = torch::log_softmax(scaled, -1);
    log_probs.push_back(log_p.gather(1, next.narrow(0, start, n)).squeeze(1));
    if (with_entropy) entropies.push_back(-(log_p.exp() * log_p).sum(-1));  // H = -sum p log p
  }
  auto joined = [&](const std::vector<at::Tensor>& parts) {
    if (parts.empty()) return torch::zeros({batch, scored}, logits.options().dtype(torch::kFloat));
    return torch::cat(parts).view({batch, scored});
  };
  return {joined(log_probs), with_entropy ? joined(entropies) : at::Tensor()};
}

TokenLogProbs token_log_probs(const at::Tensor& logits, const at::Tensor& ids, double temperature, bool with_entropy,
                              int64_t chunk_tokens) {
  check_inputs(logits, ids, temperature, /*id_range=*/false);  // label_log_probs checks the scored ids
  // Position t's logits beside token t + 1.
  const int64_t scored = std::max<int64_t>(ids.size(1) - 1, 0);
  return label_log_probs(logits.narrow(1, 0, scored), ids.narrow(1, 1, scored), temperature, with_entropy, chunk_tokens);
}

}  // namespace megacpp::inference
