// What the trainer needs of a model: token ids in, logits out, shardable and initializable.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/fsdp2_mixin.h"
#include "models/weight_init_mixin.h"
#include "parallel/module.h"

namespace megacpp::models {

struct AuxiliaryLoss {
  std::string name;  // as logged, e.g. "load_balancing_loss"
  double value = 0;  // not multiplied by its coefficient
};

class LanguageModel : public parallel::Module, public FSDP2Mixin, public WeightInitMixin {
 public:
  using parallel::Module::Module;
  // forward: ids [batch, seq] int64 -> logits [batch, seq, vocab]. A model that a multimodal
  // model can hold also takes {ids, inputs_embeds [batch, seq, hidden]} (Hugging Face's
  // inputs_embeds: the embeddings of input_embeddings_path() with other features spliced in).
  virtual int64_t vocab_size() const = 0;
  // Whether forward takes {ids, inputs_embeds} (what a multimodal model needs of it).
  virtual bool takes_inputs_embeds() const { return false; }
  virtual double flops_per_token(int64_t seq_length) const = 0;

  // The losses beside the language-model loss that the last forward computed (a mixture of
  // experts' load balancing), for the log. The model puts their gradients into backward itself
  // (Note [Load-balancing loss]); the trainer says by how much it multiplies its own loss before
  // backward (loss scale / micro-batches), so that they are scaled alike.
  virtual std::vector<AuxiliaryLoss> auxiliary_losses() const { return {}; }
  virtual void set_auxiliary_loss_scale(double /*backward_scale*/) {}

  // Megatron's names of this model's Linear layers, as MindSpeed-LLM's --lora-target-modules
  // writes them, and the modules (names or dotted path suffixes, PEFT's rule) each stands for:
  // linear_qkv -> self_attn.q_proj, self_attn.k_proj, self_attn.v_proj. Empty: no such names.
  virtual std::map<std::string, std::vector<std::string>> megatron_module_names() const { return {}; }
};

}  // namespace megacpp::models
