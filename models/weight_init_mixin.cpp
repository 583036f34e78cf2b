// Note [Sharding-independent init]
// Each parameter is generated full-size on the CPU from its own generator, seeded by the
// run's seed and the parameter's fully-qualified name, and only this rank's rows are kept
// (parallel::fsdp::copy_full_into_parameter). So the values do not depend on the world size,
// the mesh, the order modules are visited in, or whether the model was built on the meta
// device. The cost is one transient full-size copy of the parameter being initialized.
#include "models/weight_init_mixin.h"

#include <cmath>
#include <functional>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "models/layers/embedding.h"
#include "models/layers/layer_norm.h"
#include "models/layers/linear.h"
#include "models/layers/rms_norm.h"
#include "parallel/fsdp/fully_shard.h"

namespace megacpp::models {
namespace {

uint64_t seed_for(uint64_t seed, const std::string& name) {
  uint64_t hash = 1469598103934665603ull ^ seed;  // FNV-1a over the name
  for (unsigned char c : name) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

at::Tensor parameter(parallel::Module& module, const std::string& name) {
  auto params = module.named_parameters(/*recurse=*/false);
  at::Tensor* p = params.find(name);
  TORCH_CHECK(p, "module '", module.name(), "' has no parameter '", name, "'");
  return *p;
}

void post_order(torch::nn::Module& module, const std::string& path,
                std::vector<std::pair<std::string, torch::nn::Module*>>& out) {
  for (auto& child : module.named_children()) {
    post_order(*child.value(), path.empty() ? child.key() : path + "." + child.key(), out);
  }
  out.emplace_back(path, &module);
}

// Parameter `name` of `module` (at `path`), drawn full-size by `draw` from its own generator.
void fill_drawn(parallel::Module& module, const std::string& path, const std::string& name, uint64_t seed,
                const std::function<void(at::Tensor&, const at::Generator&)>& draw) {
  at::Tensor param = parameter(module, name);
  const std::string fqn = path.empty() ? name : path + "." + name;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_for(seed, fqn));
  at::Tensor full = torch::empty(parallel::fsdp::full_shape(param), torch::kFloat);
  draw(full, generator);
  parallel::fsdp::copy_full_into_parameter(param, full);
}

}  // namespace

void WeightInitMixin::fill_normal(parallel::Module& module, const std::string& path, const std::string& name,
                                  double std, uint64_t seed) {
  fill_drawn(module, path, name, seed, [std](at::Tensor& full, const at::Generator& g) { full.normal_(0.0, std, g); });
}

void WeightInitMixin::fill_uniform(parallel::Module& module, const std::string& path, const std::string& name,
                                   double bound, uint64_t seed) {
  fill_drawn(module, path, name, seed, [bound](at::Tensor& full, const at::Generator& g) { full.uniform_(-bound, bound, g); });
}

void WeightInitMixin::fill_constant(parallel::Module& module, const std::string& name, double value) {
  at::Tensor param = parameter(module, name);
  torch::NoGradGuard no_grad;
  param.fill_(value);  // a constant is the same in every shard
}

bool WeightInitMixin::init_lora(const std::string& path, parallel::Module& module, uint64_t seed) {
  if (dynamic_cast<LoraDown*>(&module)) {  // PEFT: kaiming_uniform_(a = sqrt(5)) -> U(-1/sqrt(in), 1/sqrt(in))
    const int64_t fan_in = parallel::fsdp::full_shape(parameter(module, "weight"))[1];
    fill_uniform(module, path, "weight", 1.0 / std::sqrt(static_cast<double>(fan_in)), seed);
    return true;
  }
  if (dynamic_cast<LoraUp*>(&module)) {  // PEFT: zeros, so an adapter starts as no change
    fill_constant(module, "weight", 0.0);
    return true;
  }
  return false;
}

bool WeightInitMixin::init_module(const std::string& path, parallel::Module& module, double std, uint64_t seed) {
  if (auto* linear = dynamic_cast<Linear*>(&module)) {
    fill_normal(module, path, "weight", std, seed);
    if (linear->has_bias()) fill_constant(module, "bias", 0.0);
    return true;
  }
  if (dynamic_cast<Embedding*>(&module)) {
    fill_normal(module, path, "weight", std, seed);
    return true;
  }
  if (auto* norm = dynamic_cast<RMSNorm*>(&module)) {
    fill_constant(module, "weight", norm->initial_weight());
    return true;
  }
  if (auto* norm = dynamic_cast<LayerNorm*>(&module)) {
    fill_constant(module, "weight", norm->initial_weight());
    fill_constant(module, "bias", 0.0);
    return true;
  }
  return false;
}

void WeightInitMixin::init_weights(double std, uint64_t seed) {
  auto* root = dynamic_cast<torch::nn::Module*>(this);
  TORCH_CHECK(root, "WeightInitMixin must be mixed into a torch::nn::Module");
  std::vector<std::pair<std::string, torch::nn::Module*>> modules;
  post_order(*root, "", modules);
  for (auto& [path, m] : modules) {
    auto* module = dynamic_cast<parallel::Module*>(m);
    if (!module || initialized_.count(module)) continue;
    if (init_lora(path, *module, seed) || init_module(path, *module, std, seed)) {
      initialized_.insert(module);
    } else if (!module->param_slots().empty()) {
      throw std::logic_error("init_weights: no initialization rule for module '" + path + "' (" +
                             module->name() + "); override WeightInitMixin::init_module for it");
    }
  }
}

}  // namespace megacpp::models
