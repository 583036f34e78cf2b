#include "rl/weight_sync.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "parallel/fsdp/fsdp_param.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/tensor_parallel.h"

namespace megacpp::rl {
namespace {

std::string shape_text(c10::IntArrayRef shape) { return c10::str(shape); }

}  // namespace

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
    const auto* sharded = parallel::fsdp::find_fsdp_param(item.value());
    const auto* split = parallel::tensor_parallel_placement(item.value());
    at::Tensor full = sharded ? sharded->gather_full() : item.value().detach();  // collective when sharded
    if (split && split->is_split()) full = parallel::gather_tensor_parallel(full, *split);  // collective over the TP group
    stats.tensors += 1;
    if (sharded || (split && split->is_split())) {
      stats.largest_gathered = std::max<int64_t>(stats.largest_gathered, full.numel() * full.element_size());
    }
    each(item.key(), full);
  }
}

WeightSyncStats sync_colocated_weights(torch::nn::Module& trainer, torch::nn::Module& rollout) {
  const auto start = std::chrono::steady_clock::now();
  try {
    check_same_model(trainer, "trained", rollout, "rollout");
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("weight sync: ") + e.what());
  }
  WeightSyncStats stats;
  torch::NoGradGuard no_grad;
  auto targets = rollout.named_parameters(/*recurse=*/true);
  for_each_full_parameter(trainer, stats, [&](const std::string& name, const at::Tensor& full) {
    at::Tensor& target = targets[name];
    target.copy_(full);
    stats.bytes += target.numel() * static_cast<int64_t>(target.element_size());
  });
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace megacpp::rl
