#include "models/layers/moe.h"

#include <torch/torch.h>

#include "models/layers/mlp.h"

namespace megacpp::models {

SparseMoeBlock::SparseMoeBlock(const MoeShape& shape, const at::TensorOptions& options,
                               std::shared_ptr<LoadBalancingLoss> balance, int64_t layer)
    : parallel::Module("SparseMoeBlock"), shape_(shape), balance_(std::move(balance)), layer_(layer) {
  TORCH_CHECK(shape.num_experts > 0 && shape.top_k > 0 && shape.top_k <= shape.num_experts,
              "a mixture of experts needs 0 < top-k <= experts, got ", shape.top_k, " of ", shape.num_experts);
  gate_ = register_module("gate", std::make_shared<Linear>(shape.hidden_size, shape.num_experts, false, options));
  experts_ = register_module("experts", torch::nn::ModuleList());
  for (int64_t e = 0; e < shape.num_experts; ++e) {
    experts_->push_back(std::make_shared<SwiGLUMLP>(shape.hidden_size, shape.ffn_hidden_size, options));
  }
}

at::Tensor SparseMoeBlock::forward(const at::Tensor& hidden) {
  const at::Tensor x = hidden.reshape({-1, hidden.size(-1)});  // [tokens, hidden]
  const at::Tensor probs = torch::softmax((*gate_)(x).to(torch::kFloat), -1);
  auto [weights, chosen] = probs.topk(shape_.top_k, -1);  // [tokens, k]
  if (shape_.norm_topk_prob) weights = weights / weights.sum(-1, /*keepdim=*/true);
  weights = weights.to(x.scalar_type());

  // Each (token, k) slot, sorted by expert (stable: tokens keep their order within an expert).
  const at::Tensor flat = chosen.reshape({-1});
  const at::Tensor order = std::get<1>(flat.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor token = order.div(shape_.top_k, "floor");
  const at::Tensor slot_weight = weights.reshape({-1}).index_select(0, order).unsqueeze(1);
  const at::Tensor inputs = x.index_select(0, token);
  const at::Tensor counts = torch::bincount(flat, {}, shape_.num_experts).cpu();

  at::Tensor out = torch::zeros_like(x);
  int64_t start = 0;
  for (int64_t e = 0; e < shape_.num_experts; ++e) {
    const int64_t n = counts[e].item<int64_t>();
    if (n == 0 && !run_every_expert_) continue;
    at::Tensor y = (*experts_[e]->as<SwiGLUMLP>())(inputs.narrow(0, start, n)) * slot_weight.narrow(0, start, n);
    out.index_add_(0, token.narrow(0, start, n), y);
    start += n;
  }
  if (balance_) out = balance_->attach(layer_, probs, chosen, out, hidden.dim() == 3 ? hidden.size(0) : 1);
  return out.view(hidden.sizes());
}

}  // namespace megacpp::models
