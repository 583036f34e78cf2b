#include "models/layers/load_balancing_loss.h"

#include <stdexcept>
#include <string>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

#include "parallel/compat.h"

namespace megacpp::models {
namespace {

// Identity for the layer's output; gives the layer's probability sums the loss's gradient.
class LoadBalancingBackward : public torch::autograd::Node {
 public:
  LoadBalancingBackward(std::shared_ptr<const LoadBalancingLoss> loss, int64_t layer) : loss_(std::move(loss)), layer_(layer) {}
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    return {grads[0], loss_->gradient(layer_)};
  }
  std::string name() const override { return "LoadBalancingBackward"; }

 private:
  std::shared_ptr<const LoadBalancingLoss> loss_;
  int64_t layer_;
};

}  // namespace

BalancingLoss balancing_loss_named(const std::string& name) {
  if (name == "aux_loss") return BalancingLoss::kAuxLoss;
  if (name == "seq_aux_loss") return BalancingLoss::kSeqAuxLoss;
  if (name == "transformers") return BalancingLoss::kTransformers;
  const std::string flag = "--moe-router-load-balancing-type " + name + ": ";
  if (name == "sinkhorn") throw std::invalid_argument(flag + "Megatron's Sinkhorn routing is not implemented (megacpp routes by top-k)");
  if (name == "global_aux_loss") {
    throw std::invalid_argument(flag + "Megatron's global_aux_loss (counts over the data-parallel ranks) is not implemented");
  }
  throw std::invalid_argument(flag + "expected aux_loss, seq_aux_loss, none or transformers");
}

LoadBalancingLoss::LoadBalancingLoss(const BalancingLossShape& shape)
    : shape_(shape), records_(static_cast<size_t>(shape.moe_layers)) {}

at::Tensor LoadBalancingLoss::attach(int64_t layer, const at::Tensor& probs, const at::Tensor& chosen, const at::Tensor& output,
                                     int64_t sequences) {
  const int64_t groups = shape_.type == BalancingLoss::kSeqAuxLoss ? sequences : 1;
  const int64_t tokens = probs.size(0), experts = shape_.num_experts;
  TORCH_CHECK(groups > 0 && tokens % groups == 0, "load-balancing loss: ", tokens, " tokens are not ", groups, " sequences");
  const at::Tensor prob_sum = probs.view({groups, tokens / groups, experts}).sum(1);  // [groups, E]
  const at::Tensor group = torch::arange(tokens, chosen.options()).div(tokens / groups, "floor").unsqueeze(1);
  Record& record = records_.at(static_cast<size_t>(layer));
  record.choices = torch::bincount((group * experts + chosen).reshape({-1}), {}, groups * experts).view({groups, experts}).to(torch::kFloat);
  record.prob_sum = prob_sum.detach();
  record.rows = tokens / groups;
  if (!torch::GradMode::is_enabled() || shape_.coefficient == 0.0 || !prob_sum.requires_grad() || !output.requires_grad()) {
    return output;
  }
  auto node = parallel::compat::make_autograd_node<LoadBalancingBackward>(shared_from_this(), layer);
  node->set_next_edges(torch::autograd::collect_next_edges(output, prob_sum));
  at::Tensor out = output.detach();
  torch::autograd::set_history(out, node);
  return out;
}

const LoadBalancingLoss::Record& LoadBalancingLoss::record(int64_t layer) const {
  const Record& r = records_.at(static_cast<size_t>(layer));
  if (r.rows == 0) throw std::logic_error("load-balancing loss: MoE layer " + std::to_string(layer) + " has not run");
  return r;
}

double LoadBalancingLoss::transformers_value() const {
  if (records_.empty()) throw std::logic_error("load-balancing loss: no MoE layer");
  at::Tensor choices = torch::zeros({shape_.num_experts}, torch::kDouble), prob_sum = torch::zeros_like(choices);
  double rows = 0;
  for (size_t layer = 0; layer < records_.size(); ++layer) {
    const Record& r = record(static_cast<int64_t>(layer));
    choices += r.choices.sum(0).to(torch::kDouble);
    prob_sum += r.prob_sum.sum(0).to(torch::kDouble);
    rows += static_cast<double>(r.rows * r.choices.size(0));
  }
  return static_cast<double>(shape_.num_experts) * (choices * prob_sum).sum().item<double>() / (rows * rows);
}

double LoadBalancingLoss::value() const {
  if (shape_.type == BalancingLoss::kTransformers) return transformers_value();
  double sum = 0;
  for (size_t layer = 0; layer < records_.size(); ++layer) {
    const Record& r = record(static_cast<int64_t>(layer));
    const double t = static_cast<double>(r.rows), groups = static_cast<double>(r.choices.size(0));
    const double per_group = (r.choices.to(torch::kDouble) * r.prob_sum.to(torch::kDouble)).sum().item<double>();
    sum += static_cast<double>(shape_.num_experts) * per_group / (static_cast<double>(shape_.top_k) * t * t * groups);
  }
  return sum / static_cast<double>(shape_.all_layers);
}

at::Tensor LoadBalancingLoss::gradient(int64_t layer) const {
  const double scale = shape_.coefficient * backward_scale_ * static_cast<double>(shape_.num_experts);
  if (shape_.type == BalancingLoss::kTransformers) {
    at::Tensor choices;
    double rows = 0;
    for (size_t l = 0; l < records_.size(); ++l) {
      const Record& r = record(static_cast<int64_t>(l));
      choices = choices.defined() ? choices + r.choices : r.choices;
      rows += static_cast<double>(r.rows);
    }
    return choices * (scale / (rows * rows));
  }
  const Record& r = record(layer);
  const double t = static_cast<double>(r.rows), groups = static_cast<double>(r.choices.size(0));
  return r.choices * (scale / (static_cast<double>(shape_.top_k) * t * t * groups));
}

}  // namespace megacpp::models
