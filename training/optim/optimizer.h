// The optimizer of a training run: AdamW with Megatron's weight-decay rule and its decoupled
// learning rate for the input and output layers.
#pragma once

#include <memory>
#include <unordered_set>
#include <vector>

#include <torch/optim/adamw.h>

#include "models/language_model.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/grad_norm.h"
#include "settings/arguments.h"

namespace megacpp::training::optim {

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

// The optimizer step after the backward passes, as megacpp-train and megacpp-grpo both take it,
// in two calls so that a loop may look at the norm in between (the NaN guard, --fp16's skip):
//
//   const auto norm = finish_gradients(params, mesh, device);   // collective
//   clip_and_step(optimizer, params, max_norm, norm.total);
//
// finish_gradients: every trainable parameter without a gradient gets a zero one, as Megatron's
// zeroed gradient buffers do (a parameter nothing reached, an expert no token chose, then steps
// and decays like the others, the same on every layout; frozen parameters, requires_grad false,
// are left without); beside tensor parallelism the partial gradients of replicated parameters
// are summed over the TP group; `unscale` multiplies every gradient (--fp16: 1 / the loss
// scale). Returns the global norm over the mesh (parallel::fsdp::global_grad_norm).
parallel::fsdp::GradNorm finish_gradients(std::vector<at::Tensor>& params, const parallel::DeviceMesh& mesh,
                                          const c10::Device& device, double unscale = 1.0);

// --clip-grad, then the step: the gradients scaled by parallel::fsdp::clip_coefficient(max_norm,
// norm) — by the fused AdamW as its step reads them (no pass of their own), otherwise in place.
void clip_and_step(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params, double max_norm, double norm);

}  // namespace megacpp::training::optim
