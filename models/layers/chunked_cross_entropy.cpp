#include "models/layers/chunked_cross_entropy.h"

#include <torch/torch.h>

#include "parallel/vocab_parallel.h"

namespace megacpp::models {
namespace {

// The dtype of the softmax and the sums: fp32, or fp64 for fp64 inputs.
c10::ScalarType wide_type(const at::Tensor& hidden) { return hidden.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat; }

// Each token's cross-entropy of its logits [n, vocab] (fp32 or fp64), and with `grad` its
// gradient towards them. Where the running model's vocabulary is split over a TP group, the
// logits are this rank's slice and the cross-entropy Megatron's vocabulary-parallel one.
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels, at::Tensor* grad) {
  if (const parallel::Group* vocab = parallel::vocab_parallel_group()) {
    return parallel::vocab_parallel_cross_entropy_with_grad(logits, labels, *vocab, grad);
  }
  const at::Tensor log_probs = torch::log_softmax(logits, -1);
  if (grad) {
    *grad = log_probs.exp();
    grad->scatter_add_(1, labels.unsqueeze(1), torch::full({logits.size(0), 1}, -1.0, grad->options()));
  }
  return log_probs.gather(1, labels.unsqueeze(1)).squeeze(1).neg();
}

struct ChunkSums {
  at::Tensor loss, grad_hidden, grad_weight;  // the gradients undefined where not asked for
};

// The weighted loss chunk by chunk, and with it the gradients towards hidden and/or weight.
ChunkSums sum_chunks(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels, const at::Tensor& weights,
                     int64_t chunk_size, bool want_hidden, bool want_weight) {
  const int64_t tokens = hidden.size(0);
  const auto wide = wide_type(hidden);
  ChunkSums out{torch::zeros({}, hidden.options().dtype(wide)), want_hidden ? torch::empty_like(hidden) : at::Tensor(),
                want_weight ? torch::zeros(weight.sizes(), weight.options().dtype(wide)) : at::Tensor()};
  for (int64_t start = 0; start < tokens; start += chunk_size) {
    const int64_t n = std::min(chunk_size, tokens - start);
    const at::Tensor h = hidden.narrow(0, start, n), y = labels.narrow(0, start, n), w = weights.narrow(0, start, n).to(wide);
    at::Tensor grad_logits;  // d CE / d logits = softmax - onehot(y)
    const at::Tensor losses = cross_entropy(torch::matmul(h, weight.t()).to(wide), y, want_hidden || want_weight ? &grad_logits : nullptr);
    out.loss += (losses * w).sum();
    if (!want_hidden && !want_weight) continue;
    grad_logits.mul_(w.unsqueeze(1));
    const at::Tensor g = grad_logits.to(hidden.scalar_type());
    if (want_hidden) out.grad_hidden.narrow(0, start, n).copy_(torch::matmul(g, weight));
    if (want_weight) out.grad_weight.add_(torch::matmul(g.t(), h).to(wide));
  }
  if (want_weight) out.grad_weight = out.grad_weight.to(weight.scalar_type());
  return out;
}

struct ChunkedLinearCrossEntropy : torch::autograd::Function<ChunkedLinearCrossEntropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& labels, const at::Tensor& weights, int64_t chunk_size) {
    ChunkSums sums = sum_chunks(hidden, weight, labels, weights, chunk_size, hidden.requires_grad(), weight.requires_grad());
    ctx->save_for_backward({sums.grad_hidden, sums.grad_weight});
    return sums.loss;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& scale = grads[0];
    auto scaled = [&](const at::Tensor& g) { return g.defined() ? g * scale.to(g.scalar_type()) : g; };
    return {scaled(saved[0]), scaled(saved[1]), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                        const at::Tensor& weights, int64_t chunk_size) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1), "chunked loss: hidden [tokens, ",
              weight.size(1), "] expected, got ", hidden.sizes());
  TORCH_CHECK(labels.numel() == hidden.size(0) && (!weights.defined() || weights.numel() == hidden.size(0)), "chunked loss: ",
              hidden.size(0), " tokens but ", labels.numel(), " labels and ", weights.defined() ? weights.numel() : 0, " weights");
  TORCH_CHECK(chunk_size > 0, "chunked loss: the chunk size must be positive, got ", chunk_size);
  const at::Tensor flat_labels = labels.reshape({-1});
  const at::Tensor flat_weights = weights.defined() ? weights.reshape({-1}).to(wide_type(hidden))
                                                    : torch::ones({hidden.size(0)}, hidden.options().dtype(wide_type(hidden)));
  const bool differentiable = torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  if (differentiable) return ChunkedLinearCrossEntropy::apply(hidden, weight, flat_labels, flat_weights, chunk_size);
  return sum_chunks(hidden, weight, flat_labels, flat_weights, chunk_size, false, false).loss;  // no gradients to make (validation)
}

}  // namespace megacpp::models
