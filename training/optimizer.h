// The optimizer of a training run: AdamW with Megatron's weight-decay rule and its decoupled
// learning rate for the input and output layers.
#pragma once

#include <memory>
#include <unordered_set>
#include <vector>

#include <torch/optim/adamw.h>

#include "settings/arguments.h"
#include "models/language_model.h"

namespace megacpp::training {

// Param groups: matrices with --weight-decay, biases and norm weights (1-D) without; with
// --decoupled-lr, the parameters in `input_or_output` (the token embedding and the output
// layer) in two groups of their own after those. Parameters that do not require grad are left
// out.
std::unique_ptr<torch::optim::AdamW> make_optimizer(const settings::TrainingArguments& args, const std::vector<at::Tensor>& params,
                                                    const std::unordered_set<const c10::TensorImpl*>& input_or_output = {});

// Megatron's embedding-or-output parameters: those of the model's token embedding and output
// layer modules. With --decoupled-lr, a model that names neither is an error.
std::unordered_set<const c10::TensorImpl*> input_and_output_parameters(models::LanguageModel& model, const settings::TrainingArguments& args);

// `lr` for every group, `decoupled_lr` for the input and output layers' groups.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, double decoupled_lr);

// --clip-grad: the gradients scaled by parallel::fsdp::clip_coefficient(max_norm, norm) — by
// the fused AdamW as its next step reads them (no pass of their own), otherwise in place.
void clip_gradients(torch::optim::AdamW& optimizer, const std::vector<at::Tensor>& params, double max_norm, double norm);

// Gives every parameter without a gradient a zero one, as Megatron's zeroed gradient buffers do:
// a parameter nothing reached (an expert no token chose) then steps (decays) like the others,
// the same on every layout (FSDP2 reduces such gradients as zeros). Frozen parameters
// (requires_grad false: LoRA's base weights) are left without one.
void zero_missing_gradients(std::vector<at::Tensor>& params);

}  // namespace megacpp::training
