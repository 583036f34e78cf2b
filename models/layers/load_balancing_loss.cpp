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
  explicit LoadBalancingBackward(std::shared_ptr<const LoadBalancingLoss> loss) : loss_(std::move(loss)) {}
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    return {grads[0], loss_->gradient()};
  }
  std::string name() const override { return "LoadBalancingBackward"; }

 private:
  std::shared_ptr<const LoadBalancingLoss> loss_;
};

}  // namespace

LoadBalancingLoss::LoadBalancingLoss(int64_t num_experts, int64_t layers, double coefficient)
    : num_experts_(num_experts), coefficient_(coefficient), records_(static_cast<size_t>(layers)) {}

at::Tensor LoadBalancingLoss::attach(int64_t layer, const at::Tensor& probs, const at::Tensor& chosen,
                                     const at::Tensor& output) {
  const at::Tensor prob_sum = probs.sum(0);
  Record& record = records_.at(static_cast<size_t>(layer));
  record.choices = torch::bincount(chosen.reshape({-1}), {}, num_experts_).to(torch::kFloat);
  record.prob_sum = prob_sum.detach();
  record.rows = probs.size(0);
  if (!torch::GradMode::is_enabled() || coefficient_ == 0.0 || !prob_sum.requires_grad() || !output.requires_grad()) {
    return output;
  }
  auto node = parallel::compat::make_autograd_node<LoadBalancingBackward>(shared_from_this());
  node->set_next_edges(torch::autograd::collect_next_edges(output, prob_sum));
  at::Tensor out = output.detach();
  torch::autograd::set_history(out, node);
  return out;
}

std::pair<at::Tensor, int64_t> LoadBalancingLoss::totals() const {
  if (records_.empty()) throw std::logic_error("load-balancing loss: no MoE layer");
  at::Tensor choices;
  int64_t rows = 0;
  for (size_t layer = 0; layer < records_.size(); ++layer) {
    const Record& r = records_[layer];
    if (r.rows == 0) throw std::logic_error("load-balancing loss: MoE layer " + std::to_string(layer) + " has not run");
    choices = choices.defined() ? choices + r.choices : r.choices;
    rows += r.rows;
  }
  return {choices, rows};
}

double LoadBalancingLoss::value() const {
  const auto [choices, rows] = totals();
  at::Tensor prob_sum = records_.front().prob_sum;
  for (size_t layer = 1; layer < records_.size(); ++layer) prob_sum = prob_sum + records_[layer].prob_sum;
  const double r = static_cast<double>(rows);
  return static_cast<double>(num_experts_) * (choices.to(torch::kDouble) * prob_sum.to(torch::kDouble)).sum().item<double>() / (r * r);
}

at::Tensor LoadBalancingLoss::gradient() const {
  const auto [choices, rows] = totals();
  const double r = static_cast<double>(rows);
  return choices * (coefficient_ * backward_scale_ * static_cast<double>(num_experts_) / (r * r));
}

}  // namespace megacpp::models
