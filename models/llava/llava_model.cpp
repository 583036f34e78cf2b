#include "models/llava/llava_model.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

#include "models/parallelize.h"

namespace megacpp::models {

LlavaProjector::LlavaProjector(int64_t vision_hidden, int64_t text_hidden, bool bias, const at::TensorOptions& options)
    : parallel::Module("LlavaProjector") {
  linear_1_ = register_module("linear_1", std::make_shared<Linear>(vision_hidden, text_hidden, bias, options));
  linear_2_ = register_module("linear_2", std::make_shared<Linear>(text_hidden, text_hidden, bias, options));
}

at::Tensor LlavaProjector::forward(const at::Tensor& features) { return (*linear_2_)(torch::gelu((*linear_1_)(features))); }

LlavaModel::LlavaModel(const LlavaSettings& s, std::shared_ptr<LanguageModel> language_model, const at::TensorOptions& options)
    : LanguageModel("LlavaModel"), settings_(s) {
  if (s.vision_feature_select_strategy != "default" && s.vision_feature_select_strategy != "full") {
    throw std::invalid_argument("vision_feature_select_strategy must be default or full, got '" + s.vision_feature_select_strategy + "'");
  }
  if (s.vision_layers_run() < 0 || s.vision_layers_run() > s.vision.num_layers) {
    throw std::invalid_argument("vision_feature_layer " + std::to_string(s.vision_feature_layer) + " is not a hidden state of a " +
                                std::to_string(s.vision.num_layers) + "-layer vision tower");
  }
  if (s.vision.image_size % s.vision.patch_size != 0) {
    throw std::invalid_argument("the image size " + std::to_string(s.vision.image_size) + " is not a multiple of the patch size " +
                                std::to_string(s.vision.patch_size));
  }
  if (!language_model->takes_inputs_embeds()) {
    throw std::invalid_argument("the language model (" + language_model->name() + ") takes no input embeddings, which LLaVA gives it");
  }
  for (const auto& item : language_model->named_modules("", /*include_self=*/false)) {
    if (item.key() == language_model->input_embeddings_path()) embed_tokens_ = dynamic_cast<parallel::Module*>(item.value().get());
  }
  if (!embed_tokens_ || embed_tokens_->parameters().empty()) {
    throw std::invalid_argument("the language model has no token embedding module at '" + language_model->input_embeddings_path() +
                                "' (its input_embeddings_path)");
  }
  const int64_t text_hidden = embed_tokens_->parameters().front().size(-1);
  vision_tower_ = register_module("vision_tower", std::make_shared<ClipVisionModel>(s.vision, s.vision_layers_run(), options));
  multi_modal_projector_ = register_module(
      "multi_modal_projector", std::make_shared<LlavaProjector>(s.vision.hidden_size, text_hidden, s.projector_bias, options));
  language_model_ = register_module("language_model", std::move(language_model));
  if (s.freeze_vision_tower) {
    for (auto& p : vision_tower_->parameters()) p.set_requires_grad(false);
  }
  if (s.freeze_language_model) {
    for (auto& p : language_model_->parameters()) p.set_requires_grad(false);
  }
}

std::vector<std::pair<std::string, std::string>> LlavaModel::module_classes() const {
  std::vector<std::pair<std::string, std::string>> classes = {
      {"CLIPEncoderLayer", std::string("vision_tower.") + ClipVisionModel::layer_pattern()}};
  for (const auto& [name, pattern] : language_model_->module_classes()) classes.emplace_back(name, "language_model." + pattern);
  return classes;
}

std::string LlavaModel::output_layer_path() const {
  const std::string own = language_model_->output_layer_path();
  return own.empty() ? "" : "language_model." + own;
}

std::vector<ParallelizePass> LlavaModel::parallelize_passes(std::vector<ParallelizePass> passes) const {
  insert_pass_before(passes, "fully_shard", {"llava_groups", [](Parallelization& p) {
    const auto& wrapped = p.plan.wrap_paths;
    if (std::find(wrapped.begin(), wrapped.end(), "language_model") == wrapped.end()) return false;
    throw std::invalid_argument("sub_modules_to_wrap: 'language_model' cannot be its own group: LLaVA reads its token "
                                "embedding before calling it; wrap its layers (language_model.layers.{*}) instead");
  }});
  return passes;
}

bool LlavaModel::init_module(const std::string& path, parallel::Module& module, double std, uint64_t seed) {
  if (dynamic_cast<PatchEmbedding*>(&module)) {
    fill_normal(module, path, "weight", std, seed);
    return true;
  }
  if (auto* embeddings = dynamic_cast<ClipVisionEmbeddings*>(&module)) {
    fill_normal(*embeddings, path, "class_embedding", std, seed);
    return true;
  }
  return LanguageModel::init_module(path, module, std, seed);
}

parallel::Module::Tensors LlavaModel::forward_tensors(const Tensors& inputs) {
  TORCH_CHECK(!inputs.empty() && inputs.size() <= 2, "LlavaModel takes token ids and optionally pixel values, got ", inputs.size(),
              " tensors");
  const at::Tensor& ids = inputs[0];
  at::Tensor embeds = (*embed_tokens_)(ids);
  const at::Tensor image_tokens = ids == settings_.image_token_id;
  const int64_t placeholders = image_tokens.sum().item<int64_t>();
  const auto& v = settings_.vision;
  // The tower and projector run on every batch, an empty one without images, so that every
  // rank runs the same modules (and their collectives, when they are wrapped) whatever it read.
  const at::Tensor pixels = inputs.size() == 2 && inputs[1].defined()
                                ? inputs[1]
                                : torch::zeros({0, v.num_channels, v.image_size, v.image_size}, embeds.options());
  TORCH_CHECK(pixels.dim() == 4 && pixels.size(1) == v.num_channels && pixels.size(2) == v.image_size && pixels.size(3) == v.image_size,
              "pixel values must be [images, ", v.num_channels, ", ", v.image_size, ", ", v.image_size, "], got ", pixels.sizes());
  const int64_t expected = pixels.size(0) * settings_.tokens_per_image();
  TORCH_CHECK(placeholders == expected, "the text has ", placeholders, " image tokens (id ", settings_.image_token_id, ") but ",
              pixels.size(0), " image(s) give ", expected, " features (", settings_.tokens_per_image(), " each)");
  at::Tensor features = (*vision_tower_)(pixels);
  if (settings_.vision_feature_select_strategy == "default") features = features.narrow(1, 1, features.size(1) - 1);
  features = (*multi_modal_projector_)(features).to(embeds.scalar_type());
  embeds = embeds.masked_scatter(image_tokens.unsqueeze(-1).expand_as(embeds), features);
  return (*language_model_)(Tensors{ids, embeds});
}

}  // namespace megacpp::models
