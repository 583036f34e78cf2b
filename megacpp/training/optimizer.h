// The optimizer of a training run: AdamW with Megatron's weight-decay rule.
#pragma once

#include <memory>
#include <vector>

#include <torch/optim/adamw.h>

#include "megacpp/arguments.h"

namespace megacpp::training {

// Two param groups: matrices with --weight-decay, biases and norm weights (1-D) without.
// Parameters that do not require grad are left out.
std::unique_ptr<torch::optim::AdamW> make_optimizer(const TrainingArguments& args, const std::vector<at::Tensor>& params);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace megacpp::training
