// Note [Load-balancing loss]
// transformers' load_balancing_loss_func (the Switch Transformer auxiliary loss) over the routers
// of every mixture-of-experts layer of one forward. With the R rows of all those layers' router
// probabilities p_r (softmax over the E experts), and the top-k experts each row chose,
//   loss = E * sum_e (C_e / R) * (S_e / R),
// C_e counting the (row, k) choices of expert e and S_e = sum_r p_r[e]. The counts carry no
// gradient, so d loss / d S_e = E * C_e / R^2 for every layer's rows alike; but C is known only
// once every layer has run. So each layer hands its S (with grad) to a node on its output that,
// in backward, gives S that gradient (times the coefficient and the trainer's backward scale), as
// Megatron's MoEAuxLossAutoScaler does. Nothing is added to the loss tensor, and a recomputed
// forward (activation recompute) records the same statistics and attaches the same node, so the
// gradients are the same with and without recompute.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace megacpp::models {

class LoadBalancingLoss : public std::enable_shared_from_this<LoadBalancingLoss> {
 public:
  // `layers` MoE layers of `num_experts` experts; `coefficient` scales the loss in the objective
  // (transformers' router_aux_loss_coef, Megatron's --moe-aux-loss-coeff): 0 logs it only.
  LoadBalancingLoss(int64_t num_experts, int64_t layers, double coefficient);

  // MoE layer `layer`'s router probabilities [tokens, E] (fp32) and chosen experts [tokens, k]:
  // records them (a recomputation overwrites the layer's record with the same values) and
  // returns `output` carrying the loss's gradient for this layer, when grad mode is on and the
  // coefficient is not 0.
  at::Tensor attach(int64_t layer, const at::Tensor& probs, const at::Tensor& chosen, const at::Tensor& output);

  // The loss of the last forward, not multiplied by the coefficient.
  double value() const;
  double coefficient() const { return coefficient_; }
  // What the trainer multiplies its loss by before backward (loss scale / micro-batches): the
  // injected gradients are scaled alike.
  void set_backward_scale(double scale) { backward_scale_ = scale; }

  // d (coefficient * loss * backward scale) / d S_e, for every layer: [E].
  at::Tensor gradient() const;

 private:
  struct Record {
    at::Tensor choices;   // [E] float: C_e of this layer
    at::Tensor prob_sum;  // [E] float, detached: S_e of this layer
    int64_t rows = 0;
  };
  // C and R over all layers; throws when a layer has not run since construction.
  std::pair<at::Tensor, int64_t> totals() const;

  int64_t num_experts_;
  double coefficient_;
  double backward_scale_ = 1.0;
  std::vector<Record> records_;
};

}  // namespace megacpp::models
