#include "models/tensor_parallel.h"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "models/layers/attention.h"
#include "models/layers/linear.h"
#include "models/layers/mlp.h"
#include "models/layers/moe.h"
#include "parallel/tensor_parallel.h"

namespace megacpp::models {
namespace {

Linear& projection(parallel::Module& block, const std::string& name, const std::string& path, const std::string& setting) {
  auto* found = block.named_children().find(name);
  auto* linear = found ? dynamic_cast<Linear*>(found->get()) : nullptr;
  if (!linear) throw std::logic_error(path + " without its Linear " + name);
  if (linear->has_lora()) {
    throw std::invalid_argument(setting + ": " + path + "." + name + " has a LoRA adapter; LoRA beside tensor "
                                "parallelism is not supported yet (--lora-r)");
  }
  return *linear;
}

void split_columns(parallel::Module& block, const std::string& name, const std::string& path, const std::string& setting,
                   const parallel::Group& group) {
  Linear& linear = projection(block, name, path, setting);
  parallel::split_parameter(linear, "weight", 0, group);
  if (linear.has_bias()) parallel::split_parameter(linear, "bias", 0, group);
}

void split_rows(parallel::Module& block, const std::string& name, const std::string& path, const std::string& setting,
                const parallel::Group& group) {
  Linear& linear = projection(block, name, path, setting);
  if (linear.has_bias()) {
    throw std::invalid_argument(setting + ": " + path + "." + name + " has a bias, which a row-parallel layer adds once "
                                "after its all-reduce; not supported yet");
  }
  parallel::split_parameter(linear, "weight", 1, group);
  parallel::all_reduce_output(linear, group);
}

void require_divides(int64_t count, const std::string& what, const std::string& path, const std::string& setting, int size) {
  if (count % size == 0) return;
  throw std::invalid_argument(setting + ": the " + std::to_string(count) + " " + what + " of " + path +
                              " must divide by it: each of the " + std::to_string(size) + " ranks computes an equal share");
}

void split_attention(Attention& attention, const std::string& path, const std::string& setting, const parallel::Group& group) {
  require_divides(attention.heads(), "attention heads (--num-attention-heads)", path, setting, group.size());
  require_divides(attention.kv_heads(), "query groups (--num-query-groups)", path, setting, group.size());
  parallel::all_reduce_input_gradient(attention, group);
  for (const char* name : {"q_proj", "k_proj", "v_proj"}) split_columns(attention, name, path, setting, group);
  split_rows(attention, "o_proj", path, setting, group);
  for (const char* norm : {"q_norm", "k_norm"}) {  // Qwen3: one weight for every head, each rank's heads
    auto* found = attention.named_children().find(norm);
    if (found) parallel::mark_partial_gradient(dynamic_cast<parallel::Module&>(**found), "weight", group);
  }
}

void split_mlp(SwiGLUMLP& mlp, const std::string& path, const std::string& setting, const parallel::Group& group) {
  const int64_t ffn = projection(mlp, "gate_proj", path, setting).weight().size(0);
  require_divides(ffn, "FFN columns (--ffn-hidden-size)", path, setting, group.size());
  parallel::all_reduce_input_gradient(mlp, group);
  split_columns(mlp, "gate_proj", path, setting, group);
  split_columns(mlp, "up_proj", path, setting, group);
  split_rows(mlp, "down_proj", path, setting, group);
}

}  // namespace

void apply_tensor_parallel(LanguageModel& model, const parallel::Group& group, const std::string& setting) {
  const std::string refusal = model.tensor_parallel_refusal();
  if (!refusal.empty()) throw std::invalid_argument(setting + ": this model cannot split its layers: " + refusal);
  int attention_layers = 0, mlps = 0;
  for (auto& [path, module] : parallel::named_hookable_modules(model)) {
    if (dynamic_cast<SparseMoeBlock*>(module)) {
      throw std::invalid_argument(setting + ": " + path + " is a mixture-of-experts layer (--num-experts); experts beside "
                                  "tensor parallelism are not supported yet");
    }
    if (auto* attention = dynamic_cast<Attention*>(module)) {
      split_attention(*attention, path, setting, group);
      ++attention_layers;
    } else if (auto* mlp = dynamic_cast<SwiGLUMLP*>(module)) {
      split_mlp(*mlp, path, setting, group);
      ++mlps;
    }
  }
  if (attention_layers == 0) throw std::invalid_argument(setting + ": this model has no Attention layer to split");
  spdlog::info("tensor parallel: {} attention layer(s) and {} MLP(s) split over {} ranks {}", attention_layers, mlps,
               group.size(), group.describe());
}

}  // namespace megacpp::models
