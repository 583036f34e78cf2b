#include "models/tensor_parallel.h"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "models/layers/attention.h"
#include "models/layers/core_attention.h"
#include "models/layers/embedding.h"
#include "models/layers/linear.h"
#include "models/layers/mlp.h"
#include "models/layers/moe.h"
#include "models/module_path.h"
#include "parallel/sequence_parallel.h"
#include "parallel/tensor_parallel.h"
#include "parallel/tensor_parallel_rng.h"
#include "parallel/vocab_parallel.h"

namespace megacpp::models {
namespace {

// How a block's ends communicate: all-reduces, or with sequence parallelism the all-gather and
// reduce-scatter along the sequence.
struct Split {
  const parallel::Group& group;
  const std::string& setting;
  bool sequence_parallel;

  void block_input(parallel::Module& block) const {
    if (sequence_parallel) return parallel::gather_input_sequence(block, group);
    parallel::all_reduce_input_gradient(block, group);
  }
  void row_output(parallel::Module& linear) const {
    if (sequence_parallel) return parallel::reduce_scatter_output_sequence(linear, group);
    parallel::all_reduce_output(linear, group);
  }
};

Linear& projection(parallel::Module& block, const std::string& name, const std::string& path) {
  auto* found = block.named_children().find(name);
  auto* linear = found ? dynamic_cast<Linear*>(found->get()) : nullptr;
  if (!linear) throw std::logic_error(path + " without its Linear " + name);
  return *linear;
}

// LoRA's factor lora_A or lora_B of `linear` (PEFT's adapter, models/lora.h).
parallel::Module& adapter(Linear& linear, const char* factor) {
  return dynamic_cast<parallel::Module&>(**linear.named_children().find(factor));
}

// An adapter is split like its base layer: a column-parallel layer's lora_B by rows (each rank
// its outputs; lora_A, replicated, gets a partial gradient), a row-parallel layer's lora_A by
// columns (each rank its inputs; its partial products are summed by the layer's all-reduce,
// and lora_B, replicated, gets a partial gradient).
void split_columns(Linear& linear, const Split& split, int64_t parts = 1) {
  parallel::split_parameter(linear, "weight", 0, split.group, parts);
  if (linear.has_bias()) parallel::split_parameter(linear, "bias", 0, split.group, parts);
  if (!linear.has_lora()) return;
  parallel::split_parameter(adapter(linear, "lora_B"), "weight", 0, split.group, parts);
  parallel::mark_partial_gradient(adapter(linear, "lora_A"), "weight", split.group);
}

// A bias is added once, after the parts are summed.
void split_rows(Linear& linear, const Split& split) {
  parallel::split_parameter(linear, "weight", 1, split.group);
  if (linear.has_lora()) {
    parallel::split_parameter(adapter(linear, "lora_A"), "weight", 1, split.group);
    parallel::mark_partial_gradient(adapter(linear, "lora_B"), "weight", split.group);
  }
  if (!linear.has_bias()) return split.row_output(linear);
  parallel::add_bias_once_around(linear, "bias", [&] { split.row_output(linear); });
}

void require_divides(int64_t count, const std::string& what, const std::string& path, const std::string& setting, int size) {
  if (count % size == 0) return;
  throw std::invalid_argument(setting + ": the " + std::to_string(count) + " " + what + " of " + path +
                              " must divide by it: each of the " + std::to_string(size) + " ranks computes an equal share");
}

void split_attention(Attention& attention, const std::string& path, const Split& split) {
  const parallel::Group& group = split.group;
  const std::string& setting = split.setting;
  require_divides(attention.heads(), "attention heads (--num-attention-heads)", path, setting, group.size());
  require_divides(attention.kv_heads(), "query groups (--num-query-groups)", path, setting, group.size());
  split.block_input(attention);
  for (const char* name : {"q_proj", "k_proj", "v_proj"}) split_columns(projection(attention, name, path), split);
  split_rows(projection(attention, "o_proj", path), split);
  for (const char* norm : {"q_norm", "k_norm"}) {  // Qwen3: one weight for every head, each rank's heads
    auto* found = attention.named_children().find(norm);
    if (found) parallel::mark_partial_gradient(dynamic_cast<parallel::Module&>(**found), "weight", group);
  }
}

void split_mlp(SwiGLUMLP& mlp, const std::string& path, const Split& split) {
  const parallel::Group& group = split.group;
  const std::string& setting = split.setting;
  const int64_t ffn = projection(mlp, "gate_proj", path).weight().size(0);
  require_divides(ffn, "FFN columns (--ffn-hidden-size)", path, setting, group.size());
  split.block_input(mlp);
  split_columns(projection(mlp, "gate_proj", path), split);
  split_columns(projection(mlp, "up_proj", path), split);
  split_rows(projection(mlp, "down_proj", path), split);
}

// The Linear layers of the family's plan (FSDP2Mixin::tensor_parallel_plan): column-parallel ones
// with their input's gradient summed (or the sequence gathered), row-parallel ones with their
// output summed (or reduce-scattered). Returns how many.
int split_by_plan(LanguageModel& model, const std::vector<TensorParallelLinear>& plan, const Split& split) {
  int split_layers = 0;
  for (const auto& entry : plan) {
    const ModulePathPattern pattern(entry.pattern);
    for (auto& [path, module] : parallel::named_hookable_modules(model)) {
      if (!pattern.matches(path)) continue;
      auto* linear = dynamic_cast<Linear*>(module);
      if (!linear) throw std::logic_error(path + " (FSDP2Mixin::tensor_parallel_plan) is not a models::Linear");
      require_divides(entry.units, entry.unit_name, path, split.setting, split.group.size());
      if (entry.column) {
        split.block_input(*linear);
        split_columns(*linear, split, entry.parts);
      } else {
        split_rows(*linear, split);
      }
      ++split_layers;
    }
  }
  return split_layers;
}

parallel::Module& module_at(LanguageModel& model, const std::string& path) {
  for (auto& [found, module] : parallel::named_hookable_modules(model)) {
    if (found == path) return *module;
  }
  throw std::logic_error("tensor parallelism: the model has no module '" + path + "' that FSDP2Mixin names");
}

// The token embedding and the output layer (or the embedding tied to it) split by vocabulary
// rows, the output layer's input summed in backward where the module before it makes it, and the
// logits gathered for whoever reads them whole (Note [Vocabulary parallelism]).
void split_vocabulary(LanguageModel& model, const Split& split) {
  const parallel::Group& group = split.group;
  const std::string& setting = split.setting;
  const std::string path = model.input_embeddings_path();
  auto* embedding = path.empty() ? nullptr : dynamic_cast<Embedding*>(&module_at(model, path));
  const SequenceParallelRegion region = model.sequence_parallel_region();
  if (!embedding || region.gathered_after.empty()) {
    throw std::invalid_argument(setting + ": this model does not name its token embedding (a models::Embedding, "
                                "FSDP2Mixin::input_embeddings_path) and the module before its output layer "
                                "(FSDP2Mixin::sequence_parallel_region), which vocabulary parallelism splits and hooks");
  }
  require_divides(embedding->weight().size(0),
                  "rows of the padded vocabulary (--make-vocab-size-divisible-by, --padded-vocab-size)", path, setting,
                  group.size());
  const auto& sliced = region.sliced_after;
  const bool slices_sequence = std::find(sliced.begin(), sliced.end(), path) != sliced.end();
  parallel::split_vocab_embedding(*embedding, "weight", group, split.sequence_parallel && slices_sequence);
  if (!model.output_layer_path().empty()) {
    auto* output = dynamic_cast<Linear*>(&module_at(model, model.output_layer_path()));
    if (!output) throw std::logic_error(model.output_layer_path() + " is not a models::Linear");
    split_columns(*output, split);
  }
  parallel::Module& before_output = module_at(model, region.gathered_after);
  if (split.sequence_parallel) {
    parallel::gather_output_sequence(before_output, group);
  } else {
    parallel::all_reduce_output_gradient(before_output, group);
  }
  parallel::split_model_vocabulary(model, group);
}

// Whether `path` is the module `module` or one inside it.
bool within_module(const std::string& path, const std::string& module) {
  return path == module || path.rfind(module + ".", 0) == 0;
}

// The sequence sliced after the region's first modules (the token embedding's reduce-scatter
// when it is one of them, split_vocabulary) and gathered after its last (split_vocabulary);
// every replicated parameter read in between gets a partial gradient (Note [Sequence
// parallelism]). The first modules, the output layer and the `whole` modules (run on whole
// sequences, whole_sequence_inside) see whole sequences: their gradients are whole.
void split_sequence(LanguageModel& model, const Split& split, std::vector<std::string> whole) {
  const SequenceParallelRegion region = model.sequence_parallel_region();
  if (region.sliced_after.empty() || region.gathered_after.empty()) {
    throw std::invalid_argument(split.setting + " --sequence-parallel: this model does not say where its sequence may be split "
                                "(FSDP2Mixin::sequence_parallel_region)");
  }
  for (const std::string& first : region.sliced_after) {
    if (first != model.input_embeddings_path()) parallel::scatter_output_sequence(module_at(model, first), split.group);
    whole.push_back(first);
  }
  if (!model.output_layer_path().empty()) whole.push_back(model.output_layer_path());  // empty when tied to the embedding
  for (auto& [path, module] : parallel::named_hookable_modules(model)) {
    const auto reads_whole = [&path = path](const std::string& whole_module) { return within_module(path, whole_module); };
    if (path.empty() || std::any_of(whole.begin(), whole.end(), reads_whole)) continue;
    for (const auto& slot : module->param_slots()) {
      if (!slot.member->defined() || parallel::tensor_parallel_placement(*slot.member)) continue;
      parallel::mark_partial_gradient(*module, slot.name, split.group);
    }
  }
}

struct SplitLayers {
  int attention = 0, mlps = 0;
  std::vector<std::string> experts;  // the mixture-of-experts layers' paths
};

// models::Attention and dense models::SwiGLUMLP layers split as Megatron splits its layer;
// mixture-of-experts layers stay whole on each rank: every rank routes the same whole tokens
// through the same experts, so their gradients are whole (with sequence parallelism they gather
// the whole sequences: their load-balancing loss is the whole sequences').
SplitLayers split_by_type(LanguageModel& model, const Split& split) {
  SplitLayers counts;
  for (auto& [path, module] : parallel::named_hookable_modules(model)) {
    if (!counts.experts.empty() && within_module(path, counts.experts.back())) continue;
    if (dynamic_cast<SparseMoeBlock*>(module)) {
      if (split.sequence_parallel) parallel::whole_sequence_inside(*module, split.group);
      counts.experts.push_back(path);
    } else if (auto* attention = dynamic_cast<Attention*>(module)) {
      split_attention(*attention, path, split);
      ++counts.attention;
    } else if (auto* mlp = dynamic_cast<SwiGLUMLP*>(module)) {
      split_mlp(*mlp, path, split);
      ++counts.mlps;
    }
  }
  return counts;
}

// Dropout where each rank computes its own share draws from the rank's own stream (Note
// [Tensor-parallel random numbers]): with sequence parallelism in the whole model (what runs
// whole on every rank, the embeddings, the output layer and the experts, draws nothing),
// otherwise in each attention's core (its heads).
void fork_random_numbers_of_shares(LanguageModel& model, const Split& split) {
  if (split.sequence_parallel) return parallel::fork_random_numbers(model, split.group);
  for (auto& [path, module] : parallel::named_hookable_modules(model)) {
    if (dynamic_cast<CoreAttention*>(module)) parallel::fork_random_numbers(*module, split.group);
  }
}

}  // namespace

void apply_tensor_parallel(LanguageModel& model, const parallel::Group& group, const std::string& setting,
                           bool sequence_parallel) {
  const Split split{group, setting, sequence_parallel};
  const std::string refusal = model.tensor_parallel_refusal();
  if (!refusal.empty()) throw std::invalid_argument(setting + ": this model cannot split its layers: " + refusal);
  const std::vector<TensorParallelLinear> plan = model.tensor_parallel_plan();
  std::string what;
  std::vector<std::string> replicated;  // layers run whole on each rank
  if (plan.empty()) {
    SplitLayers layers = split_by_type(model, split);
    if (layers.attention == 0) throw std::invalid_argument(setting + ": this model has no Attention layer to split");
    what = fmt::format("{} attention layer(s), {} MLP(s)", layers.attention, layers.mlps);
    if (!layers.experts.empty()) what += fmt::format(" ({} mixture-of-experts layer(s) replicated on each)", layers.experts.size());
    replicated = std::move(layers.experts);
  } else {
    const int layers = split_by_plan(model, plan, split);
    if (layers == 0) throw std::invalid_argument(setting + ": no layer of this model matches its tensor-parallel plan");
    what = fmt::format("{} Linear layer(s) of its plan", layers);
  }
  split_vocabulary(model, split);
  if (sequence_parallel) split_sequence(model, split, std::move(replicated));
  fork_random_numbers_of_shares(model, split);
  spdlog::info("tensor parallel: {} and the vocabulary split over {} ranks {}{}", what, group.size(), group.describe(),
               sequence_parallel ? ", sequence parallel between them" : "");
}

}  // namespace megacpp::models
