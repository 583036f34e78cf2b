#include "megacpp/training/optimizer.h"

namespace megacpp::training {

std::unique_ptr<torch::optim::AdamW> make_optimizer(const TrainingArguments& args, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> decay, no_decay;
  for (const auto& p : params) {
    if (!p.requires_grad()) continue;
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  auto options = torch::optim::AdamWOptions(args.lr)
                     .betas({args.adam_beta1, args.adam_beta2})
                     .eps(args.adam_eps)
                     .weight_decay(args.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(options));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(options).weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(groups, options);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

}  // namespace megacpp::training
