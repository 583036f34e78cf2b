// What the trainer needs of a model: token ids in, logits out, shardable and initializable.
//
// Note [Packed documents]
// A sequence may hold several documents (pretraining text between end-of-document tokens,
// conversations packed by megacpp-preprocess --pack). By default attention and positions run
// over the whole sequence (Megatron's default). Megatron's --reset-position-ids numbers each
// document's tokens from 0 and --reset-attention-mask lets a token see only its own document's
// earlier tokens; the trainer then gives forward_tensors the position of each token
// (kPositionIds) and its document (kDocumentIds, any id, equal within a document), each
// [batch, seq] int64 over the whole sequence (also under Ulysses, where the ids are a rank's slice:
// attention sees the whole sequence).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/fsdp2_mixin.h"
#include "models/weight_init_mixin.h"
#include "parallel/module.h"

namespace megacpp::models {

// The places of forward_tensors' inputs. All but the ids may be undefined or left off; the
// second is the model's own: the inputs_embeds of a language model (takes_inputs_embeds), a
// multimodal model's images.
// kLabels [batch, seq] int64 and kLossMask [batch, seq] bool (undefined: every label counts) make
// a model that takes_labels return {the summed cross-entropy of the counted labels} instead of
// the logits, its output layer computed loss_chunk_size() tokens at a time (Note [Chunked loss]
// in models/layers/chunked_cross_entropy.h).
enum ModelInput : size_t { kTokenIds = 0, kModelExtra = 1, kPositionIds = 2, kDocumentIds = 3, kLabels = 4, kLossMask = 5 };

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
  // Whether forward_tensors takes kPositionIds and kDocumentIds (Note [Packed documents]).
  virtual bool takes_packed_documents() const { return false; }
  // Whether forward_tensors keeps and reads a KvCacheScope's cache (Note [KV cache] in
  // models/layers/kv_cache.h), given the new tokens' kPositionIds.
  virtual bool takes_kv_cache() const { return false; }
  // Whether forward_tensors takes kLabels and kLossMask (--loss-compute-mode chunk).
  virtual bool takes_labels() const { return false; }
  // --loss-chunk-size with --loss-compute-mode chunk (0: the trainer passes no labels).
  int64_t loss_chunk_size() const { return loss_chunk_size_; }
  void set_loss_chunk_size(int64_t tokens) { loss_chunk_size_ = tokens; }

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

 protected:
  // The summed cross-entropy of the counted labels of inputs[kLabels] (and kLossMask) on the
  // final hidden states [batch, seq, hidden], by `output` (a Linear's call, hooks and all) or,
  // when it is null, by `tied_weight` (Note [Chunked loss]).
  at::Tensor chunked_loss(const at::Tensor& hidden, const Tensors& inputs, const std::shared_ptr<parallel::Module>& output,
                          const at::Tensor& tied_weight) const;

 private:
  int64_t loss_chunk_size_ = 0;
};

}  // namespace megacpp::models
