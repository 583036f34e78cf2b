// Note [Load-balancing loss]
// The auxiliary loss that keeps a mixture of experts' routers balanced, in one of three forms
// (--moe-router-load-balancing-type). With a router's probabilities p (softmax over the E
// experts) and the top-k experts each token chose, over a group of T tokens let S_e = sum p[e]
// and C_e count the (token, k) choices of expert e:
// - aux_loss (Megatron's switch_load_balancing_loss_func, its default): each MoE layer's own
//   loss E / (k T^2) * sum_e S_e C_e over the micro-batch's tokens, the layers' losses added to
//   the objective (each times the coefficient); logged as their sum over --num-layers, as
//   Megatron's tracker averages (dense layers count as 0);
// - seq_aux_loss (Megatron's): the same per sequence, T its length, averaged over the sequences;
// - transformers (transformers' load_balancing_loss_func, Qwen3-MoE's in Hugging Face, and what a
//   folder megacpp imports trains with): one loss over the R rows of every MoE layer together,
//   E * sum_e (C_e / R) (S_e / R), no 1/k.
// The counts carry no gradient, so d loss / d S_e is known once the counts are: for aux_loss and
// seq_aux_loss as each layer runs, for transformers only once every layer has. So each layer
// hands its S (with grad) to a node on its output that, in backward, gives S that gradient (times
// the coefficient and the trainer's backward scale), as Megatron's MoEAuxLossAutoScaler does.
// Nothing is added to the loss tensor, and a recomputed forward (activation recompute) records
// the same statistics and attaches the same node, so the gradients are the same with and
// without recompute.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace megacpp::models {

enum class BalancingLoss { kAuxLoss, kSeqAuxLoss, kTransformers };

// "aux_loss", "seq_aux_loss", "transformers"; throws std::invalid_argument naming the flag for
// others (Megatron's sinkhorn and global_aux_loss with the reason).
BalancingLoss balancing_loss_named(const std::string& name);

struct BalancingLossShape {
  BalancingLoss type = BalancingLoss::kAuxLoss;
  int64_t num_experts = 0;
  int64_t top_k = 1;
  int64_t moe_layers = 0;     // the layers that record
  int64_t all_layers = 0;     // what aux_loss's logged sum is divided by (--num-layers)
  double coefficient = 0.0;   // --moe-aux-loss-coeff (transformers' router_aux_loss_coef): 0 logs it only
};

class LoadBalancingLoss : public std::enable_shared_from_this<LoadBalancingLoss> {
 public:
  explicit LoadBalancingLoss(const BalancingLossShape& shape);

  // MoE layer `layer`'s router probabilities [tokens, E] (fp32) and chosen experts [tokens, k]
  // of `sequences` sequences (tokens in sequence order): records them (a recomputation
  // overwrites the layer's record with the same values) and returns `output` carrying the loss's
  // gradient for this layer, when grad mode is on and the coefficient is not 0.
  at::Tensor attach(int64_t layer, const at::Tensor& probs, const at::Tensor& chosen, const at::Tensor& output,
                    int64_t sequences);

  // The loss of the last forward, not multiplied by the coefficient.
  double value() const;
  double coefficient() const { return shape_.coefficient; }
  // What the trainer multiplies its loss by before backward (loss scale / micro-batches): the
  // injected gradients are scaled alike.
  void set_backward_scale(double scale) { backward_scale_ = scale; }

  // d (coefficient * loss * backward scale) / d S of layer `layer`: [groups, E].
  at::Tensor gradient(int64_t layer) const;

 private:
  struct Record {
    at::Tensor choices;   // [groups, E] float: C_e of each group (aux_loss and transformers: one)
    at::Tensor prob_sum;  // [groups, E] float, detached: S_e of each group
    int64_t rows = 0;     // tokens in each group
  };
  const Record& record(int64_t layer) const;  // throws when the layer has not run since construction
  // transformers': C and S summed over the layers, and R.
  double transformers_value() const;

  BalancingLossShape shape_;
  double backward_scale_ = 1.0;
  std::vector<Record> records_;
};

}  // namespace megacpp::models
