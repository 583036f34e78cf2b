#include "rl/weight_sync.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "models/layers/linear.h"
#include "models/lora.h"
#include "parallel/fsdp/fsdp_param.h"
#include "parallel/fsdp/fully_shard.h"

namespace megacpp::rl {
namespace {

std::string shape_text(c10::IntArrayRef shape) { return c10::str(shape); }

bool is_lora_down(const std::string& name) { return name.find(".lora_A.") != std::string::npos; }

// The adapted Linear weights of `trainer` ("x.weight" of each "x.lora_A.weight") and each one's
// alpha / rank.
std::map<std::string, double> adapted_weights(torch::nn::Module& trainer) {
  std::map<std::string, double> adapted;
  for (const auto& item : trainer.named_modules()) {
    const auto* linear = dynamic_cast<const models::Linear*>(item.value().get());
    if (linear && linear->has_lora()) adapted[item.key() + ".weight"] = linear->lora_scaling();
  }
  return adapted;
}

// Calls `each(name)` in rollout_weights' order for the names of `trainer`'s parameters (in module
// order: a Linear's weight before its lora_A and lora_B): an adapted weight when its lora_B comes.
void in_rollout_order(const std::vector<std::string>& names, const std::map<std::string, double>& adapted,
                      const std::function<void(const std::string&)>& each) {
  for (const std::string& name : names) {
    if (!models::is_lora_parameter(name)) {
      if (adapted.count(name) == 0) each(name);
    } else if (!is_lora_down(name)) {
      each(models::lora_base_weight(name));
    }
  }
}

}  // namespace

std::vector<RolloutWeight> rollout_weights(torch::nn::Module& trainer) {
  std::map<std::string, RolloutWeight> by_name;
  std::vector<std::string> names;
  for (const auto& item : trainer.named_parameters(/*recurse=*/true)) {
    const c10::ScalarType dtype = parallel::fsdp::find_fsdp_param(item.value()) ? c10::kFloat : item.value().scalar_type();
    by_name[item.key()] = {item.key(), parallel::fsdp::full_shape(item.value()), dtype};
    names.push_back(item.key());
  }
  std::vector<RolloutWeight> weights;
  in_rollout_order(names, adapted_weights(trainer), [&](const std::string& name) { weights.push_back(by_name.at(name)); });
  return weights;
}

void for_each_rollout_weight(torch::nn::Module& trainer, WeightSyncStats& stats,
                             const std::function<void(const std::string&, const at::Tensor&)>& each) {
  const std::map<std::string, double> adapted = adapted_weights(trainer);
  std::map<std::string, at::Tensor> held;  // an adapted weight and its lora_A, until its lora_B comes
  for_each_full_parameter(trainer, stats, [&](const std::string& name, const at::Tensor& full) {
    if (!models::is_lora_parameter(name) && adapted.count(name) == 0) return each(name, full);
    if (!models::is_lora_parameter(name) || is_lora_down(name)) {
      held[name] = full;
      return;
    }
    const std::string base = models::lora_base_weight(name), down = base.substr(0, base.size() - 6) + "lora_A.weight";
    const at::Tensor& weight = held.at(base);
    each(base, weight + full.matmul(held.at(down)).mul(adapted.at(base)).to(weight.scalar_type()));
    held.erase(base);
    held.erase(down);
  });
}

void check_rollout_model(const std::vector<RolloutWeight>& weights, torch::nn::Module& rollout) {
  const auto targets = rollout.named_parameters(/*recurse=*/true);
  std::set<std::string> taken;
  for (const RolloutWeight& w : weights) {
    taken.insert(w.name);
    const at::Tensor* target = targets.find(w.name);
    if (!target) throw std::invalid_argument("the rollout model has no parameter " + w.name + " of the trained one");
    if (target->sizes().vec() != w.shape) {
      throw std::invalid_argument("parameter " + w.name + " is " + shape_text(w.shape) + " in the trained model and " +
                                  shape_text(target->sizes()) + " in the rollout model");
    }
  }
  for (const auto& item : targets) {
    if (taken.count(item.key()) == 0) throw std::invalid_argument("the trained model has no parameter " + item.key() + " of the rollout one");
  }
}

void check_same_model(torch::nn::Module& a, const std::string& a_name, torch::nn::Module& b, const std::string& b_name) {
  const auto in_a = a.named_parameters(/*recurse=*/true), in_b = b.named_parameters(/*recurse=*/true);
  for (const auto& item : in_a) {
    const at::Tensor* twin = in_b.find(item.key());
    if (!twin) throw std::invalid_argument("the " + b_name + " model has no parameter " + item.key() + " of the " + a_name + " one");
    const std::vector<int64_t> shape = parallel::fsdp::full_shape(item.value()), twin_shape = parallel::fsdp::full_shape(*twin);
    if (shape != twin_shape) {
      throw std::invalid_argument("parameter " + item.key() + " is " + shape_text(shape) + " in the " + a_name + " model and " +
                                  shape_text(twin_shape) + " in the " + b_name + " model");
    }
  }
  for (const auto& item : in_b) {
    if (!in_a.find(item.key())) throw std::invalid_argument("the " + a_name + " model has no parameter " + item.key() + " of the " + b_name + " one");
  }
}

void for_each_full_parameter(torch::nn::Module& model, WeightSyncStats& stats,
                             const std::function<void(const std::string&, const at::Tensor&)>& each) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor full = parallel::fsdp::gather_full_parameter(item.value());  // collective when sharded or split
    stats.tensors += 1;
    if (!full.is_alias_of(item.value())) stats.largest_gathered = std::max<int64_t>(stats.largest_gathered, full.numel() * full.element_size());
    each(item.key(), full);
  }
}

WeightSyncStats sync_colocated_weights(torch::nn::Module& trainer, torch::nn::Module& rollout) {
  const auto start = std::chrono::steady_clock::now();
  try {
    check_rollout_model(rollout_weights(trainer), rollout);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("weight sync: ") + e.what());
  }
  WeightSyncStats stats;
  torch::NoGradGuard no_grad;
  auto targets = rollout.named_parameters(/*recurse=*/true);
  for_each_rollout_weight(trainer, stats, [&](const std::string& name, const at::Tensor& full) {
    at::Tensor& target = targets[name];
    target.copy_(full);
    stats.bytes += target.numel() * static_cast<int64_t>(target.element_size());
  });
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace megacpp::rl
