#include "models/long_context.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <spdlog/spdlog.h>

#include "models/layers/attention.h"
#include "models/layers/mlp.h"
#include "models/layers/moe.h"
#include "parallel/tiled_forward.h"
#include "parallel/ulysses.h"

namespace megacpp::models {
namespace {

parallel::Module& child(parallel::Module& module, const std::string& name) {
  auto* found = dynamic_cast<parallel::Module*>(module.named_children()[name].get());
  if (!found) throw std::logic_error("Attention without its " + name);
  return *found;
}

}  // namespace

void apply_ulysses(LanguageModel& model, const parallel::Group& group, const std::string& setting) {
  const std::string size = std::to_string(group.size());
  const std::string refusal = model.ulysses_refusal();
  if (!refusal.empty()) throw std::invalid_argument(setting + ": this model cannot split its sequences: " + refusal);
  int layers = 0;
  for (auto& [path, module] : parallel::named_hookable_modules(model)) {
    auto* attention = dynamic_cast<Attention*>(module);
    if (!attention) continue;
    if (attention->heads() % group.size() != 0 || attention->kv_heads() % group.size() != 0) {
      throw std::invalid_argument(setting + ": the " + std::to_string(attention->heads()) +
                                  " attention heads (--num-attention-heads) and " + std::to_string(attention->kv_heads()) +
                                  " query groups (--num-query-groups) of " + path + " must both divide by it: each of the " +
                                  size + " ranks computes an equal share of them");
    }
    for (const char* projection : {"q_proj", "k_proj", "v_proj"}) {
      parallel::split_output_by_heads(child(*attention, projection), group);
    }
    parallel::split_input_by_sequence(child(*attention, "o_proj"), group);
    ++layers;
  }
  if (layers == 0) throw std::invalid_argument(setting + ": this model has no Attention layer to split by heads");
  spdlog::info("ulysses: each sequence split over {} ranks {}; {} attention layer(s) exchange sequence for heads", group.size(),
               group.describe(), layers);
}

void apply_tiled_mlp(LanguageModel& model, int tiles, const std::string& key) {
  int mlps = 0;
  std::vector<std::string> moe_blocks;  // their experts are SwiGLU MLPs too, left alone
  for (auto& [path, module] : parallel::named_hookable_modules(model)) {  // pre-order: a block before its experts
    if (dynamic_cast<SparseMoeBlock*>(module)) moe_blocks.push_back(path + ".");
    const bool expert = std::any_of(moe_blocks.begin(), moe_blocks.end(),
                                    [&path = path](const std::string& block) { return path.rfind(block, 0) == 0; });
    if (!dynamic_cast<SwiGLUMLP*>(module) || expert) continue;
    parallel::enable_tiled_forward(*module, tiles, /*dim=*/-2);  // the tokens of [batch, seq, hidden]
    ++mlps;
  }
  if (mlps == 0) throw std::invalid_argument(key + ": this model has no SwiGLU MLP to tile");
  spdlog::info("tiled mlp: {} MLP(s) run over {} tiles of the sequence, each recomputed in backward", mlps, tiles);
}

}  // namespace megacpp::models
