#include "training/optim/optimizer.h"

#include <stdexcept>
#include <string>

#include "parallel/fsdp/grad_norm.h"
#include "parallel/tensor_parallel.h"
#include "training/optim/fused_adamw.h"

namespace megacpp::training::optim {
namespace {

// Groups 0 and 1 take --lr; groups 2 and 3, when there, --decoupled-lr.
constexpr size_t kFirstDecoupledGroup = 2;

}  // namespace

std::unique_ptr<torch::optim::AdamW> make_optimizer(const settings::TrainingArguments& args, const std::vector<at::Tensor>& params,
                                                    const std::unordered_set<const c10::TensorImpl*>& input_or_output) {
  const bool decoupled = args.decoupled_lr >= 0;
  std::vector<at::Tensor> members[4];  // decay, no decay, decoupled decay, decoupled no decay
  for (const auto& p : params) {
    if (!p.requires_grad()) continue;
    const size_t base = decoupled && input_or_output.count(p.unsafeGetTensorImpl()) > 0 ? kFirstDecoupledGroup : 0;
    members[base + (p.dim() >= 2 ? 0 : 1)].push_back(p);
  }
  auto options = torch::optim::AdamWOptions(args.lr)
                     .betas({args.adam_beta1, args.adam_beta2})
                     .eps(args.adam_eps)
                     .weight_decay(args.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (size_t g = 0; g < (decoupled ? 4u : 2u); ++g) {
    auto group_options = std::make_unique<torch::optim::AdamWOptions>(options);
    if (g % 2 == 1) group_options->weight_decay(0.0);
    groups.emplace_back(members[g], std::move(group_options));
  }
  if (args.kernel_fusion) return std::make_unique<FusedAdamW>(std::move(groups), options);  // Note [Fused kernels]
  return std::make_unique<torch::optim::AdamW>(groups, options);
}

std::unordered_set<const c10::TensorImpl*> input_and_output_parameters(models::LanguageModel& model, const settings::TrainingArguments& args) {
  std::unordered_set<const c10::TensorImpl*> found;
  for (const std::string& path : {model.input_embeddings_path(), model.output_layer_path()}) {
    if (path.empty()) continue;
    for (const auto& item : model.named_parameters(/*recurse=*/true)) {
      if (item.key().rfind(path + ".", 0) == 0) found.insert(item.value().unsafeGetTensorImpl());
    }
  }
  if (args.decoupled_lr >= 0 && found.empty()) {
    throw std::invalid_argument("--decoupled-lr: model type '" + args.model_type +
                                "' names no token embedding or output layer module (FSDP2Mixin::input_embeddings_path)");
  }
  return found;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, double decoupled_lr) {
  auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    static_cast<torch::optim::AdamWOptions&>(groups[g].options()).lr(g >= kFirstDecoupledGroup ? decoupled_lr : lr);
  }
}

parallel::fsdp::GradNorm finish_gradients(std::vector<at::Tensor>& params, const parallel::DeviceMesh& mesh,
                                          const c10::Device& device, double unscale) {
  for (auto& p : params) {
    if (p.requires_grad() && !p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  }
  if (mesh.tp().size() > 1) parallel::all_reduce_partial_gradients(params, device);
  if (unscale != 1.0) {
    for (auto& p : params) {
      if (p.grad().defined()) p.mutable_grad().mul_(unscale);
    }
  }
  return parallel::fsdp::global_grad_norm(params, mesh, device);
}

void clip_and_step(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params, double max_norm, double norm) {
  if (auto* fused = dynamic_cast<FusedAdamW*>(&optimizer)) {
    fused->scale_gradients(parallel::fsdp::clip_coefficient(max_norm, norm));
  } else {
    parallel::fsdp::clip_gradients(params, max_norm, norm);
  }
  optimizer.step();
}

}  // namespace megacpp::training::optim
