// A LLaVA-style vision-language model whose math matches Hugging Face's
// LlavaForConditionalGeneration: a CLIP vision tower, a two-layer projector, and any of megacpp's
// language models that takes input embeddings (LanguageModel). Each image's features replace
// the image placeholder tokens of the text, in order, as transformers' masked_scatter does.
// Module names follow Hugging Face's saved (legacy) layout: vision_tower.vision_model.*,
// multi_modal_projector.linear_{1,2}, language_model.* (the language model's own names).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/language_model.h"
#include "models/layers/linear.h"
#include "models/llava/clip_vision.h"

namespace megacpp::models {

struct LlavaSettings {
  ClipVisionConfig vision;
  // transformers' vision_feature_layer: an index into hidden_states (num_layers + 1 entries, the
  // first the embeddings); negative counts from the end (-2: the output of the last layer but one).
  int64_t vision_feature_layer = -2;
  // "default" drops the class token's feature, "full" keeps it.
  std::string vision_feature_select_strategy = "default";
  int64_t image_token_id = 32000;
  bool projector_bias = true;  // multimodal_projector_bias
  // Megatron's --freeze-ViT / --freeze-LM: the vision tower's / the language model's parameters
  // take no gradient (the projector always trains).
  bool freeze_vision_tower = false;
  bool freeze_language_model = false;

  // Placeholder tokens each image takes in the text.
  int64_t tokens_per_image() const { return vision.num_positions() - (vision_feature_select_strategy == "default" ? 1 : 0); }
  // vision_feature_layer as a count of encoder layers to run.
  int64_t vision_layers_run() const { return vision_feature_layer < 0 ? vision.num_layers + 1 + vision_feature_layer : vision_feature_layer; }
};

// LlavaMultiModalProjector: linear_2(gelu(linear_1(x))), gelu the exact (erf) one.
class LlavaProjector : public parallel::Module {
 public:
  LlavaProjector(int64_t vision_hidden, int64_t text_hidden, bool bias, const at::TensorOptions& options);

 protected:
  at::Tensor forward(const at::Tensor& features) override;

 private:
  std::shared_ptr<Linear> linear_1_, linear_2_;
};

class LlavaModel : public LanguageModel {
 public:
  // Throws std::invalid_argument for settings transformers refuses (the strategy, the layer),
  // or a language model that takes no input embeddings. The projector's output size is the
  // language model's embedding width.
  LlavaModel(const LlavaSettings& settings, std::shared_ptr<LanguageModel> language_model, const at::TensorOptions& options);

  const LlavaSettings& settings() const { return settings_; }
  int64_t vocab_size() const override { return language_model_->vocab_size(); }
  double flops_per_token(int64_t seq_length) const override { return language_model_->flops_per_token(seq_length); }
  // CLIPEncoderLayer (vision_tower.vision_model.encoder.layers.{*}) and the language model's
  // classes under language_model.
  std::vector<std::pair<std::string, std::string>> module_classes() const override;
  // CLIPEncoderLayer: false. The tower's activations come as the previous layer made them, as
  // ROLL wraps a vision encoder (for precision).
  std::map<std::string, bool> cast_forward_inputs_by_class() const override { return {{"CLIPEncoderLayer", false}}; }
  std::string input_embeddings_path() const override { return "language_model." + language_model_->input_embeddings_path(); }
  std::string output_layer_path() const override;
  std::string ulysses_refusal() const override {
    return "llava splices each image's features into the whole sequence where its image tokens are";
  }
  // parallelize's passes with a check before fully_shard: language_model cannot be a group of
  // its own (its token embedding runs before it is called).
  std::vector<ParallelizePass> parallelize_passes(std::vector<ParallelizePass> passes) const override;
  std::vector<AuxiliaryLoss> auxiliary_losses() const override { return language_model_->auxiliary_losses(); }
  void set_auxiliary_loss_scale(double scale) override { language_model_->set_auxiliary_loss_scale(scale); }

 protected:
  // {ids [batch, seq]} or {ids, pixel values [images, channels, size, size]} -> {logits}: the
  // images' features, in order, take the places of the image tokens of ids (row by row).
  Tensors forward_tensors(const Tensors& inputs) override;
  // The patch embedding and the class embedding ~ N(0, std), as the other weights.
  bool init_module(const std::string& path, parallel::Module& module, double std, uint64_t seed) override;

 private:
  LlavaSettings settings_;
  std::shared_ptr<ClipVisionModel> vision_tower_;
  std::shared_ptr<LlavaProjector> multi_modal_projector_;
  std::shared_ptr<LanguageModel> language_model_;
  parallel::Module* embed_tokens_ = nullptr;  // the language model's, called with image features spliced in after
};

}  // namespace megacpp::models
