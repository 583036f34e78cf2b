#pragma once

#include <memory>

#include <torch/nn/modules/container/modulelist.h>

#include "models/layers/linear.h"
#include "models/layers/load_balancing_loss.h"

namespace megacpp::models {

struct MoeShape {
  int64_t hidden_size = 0;
  int64_t ffn_hidden_size = 0;  // of each expert
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;   // renormalize the top-k weights to sum to 1
};

// A mixture-of-experts MLP as Hugging Face's Qwen3MoeSparseMoeBlock computes it: the router
// (child `gate`, a Linear without bias) scores every expert for each token, the softmax is
// taken in fp32, the top-k experts are kept (their weights renormalized when norm_topk_prob,
// then cast back), each expert (children experts.E) is a SwiGLU MLP, and a token's output is the
// weighted sum of its experts' outputs, added in expert order. Tokens are grouped per expert:
// sorted by expert, each expert runs once over its contiguous slice, and the results are
// scattered back; an expert that no token chose does not run, unless every expert must run
// (set_run_every_expert). With `balance`, the block is its MoE layer `layer` of the model's
// load-balancing loss (models/layers/load_balancing_loss.h).
class SparseMoeBlock : public parallel::Module {
 public:
  SparseMoeBlock(const MoeShape& shape, const at::TensorOptions& options,
                 std::shared_ptr<LoadBalancingLoss> balance = nullptr, int64_t layer = 0);

  // Every expert runs on every forward, one that no token chose on an empty input (ROLL's
  // apply_expert_patch): each expert's module is called, and back-propagated through, the same
  // number of times on every rank, whatever the routing.
  void set_run_every_expert(bool run) { run_every_expert_ = run; }
  int64_t num_experts() const { return shape_.num_experts; }

 protected:
  at::Tensor forward(const at::Tensor& hidden) override;  // [..., hidden]

 private:
  MoeShape shape_;
  std::shared_ptr<LoadBalancingLoss> balance_;
  int64_t layer_;
  bool run_every_expert_ = false;
  std::shared_ptr<Linear> gate_;
  torch::nn::ModuleList experts_;
};

}  // namespace megacpp::models
