// The LLaVA model (models/llava) against an independent NumPy forward of transformers' CLIP +
// LLaVA code (tests/reference/llava_forward.py): a tiny model with a Llama language model, its
// weights written under the names transformers saves, two images spliced into two prompts; the
// logits must agree for both feature selections (the last layer but one without the class
// token, as LLaVA-1.5; an earlier layer with it). megacpp-convert imports folders of both of
// transformers' layouts and exports the tensors it read.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "models/llama/llama_hf.h"
#include "models/llama/llama_model.h"
#include "models/llava/llava_model.h"
#include "io/serialization/safetensors.h"
#include "tests/support/command.h"
#include "tests/support/distributed_test.h"
#include "tests/support/hf_reference.h"
#include "tests/support/tiny_llama.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kImageToken = 49;

models::LlavaSettings tiny_settings(int64_t feature_layer, const std::string& strategy) {
  models::LlavaSettings s;
  s.vision.hidden_size = 16;
  s.vision.intermediate_size = 24;
  s.vision.num_layers = 3;
  s.vision.num_heads = 2;
  s.vision.image_size = 8;
  s.vision.patch_size = 4;
  s.vision_feature_layer = feature_layer;
  s.vision_feature_select_strategy = strategy;
  s.image_token_id = kImageToken;
  return s;
}

// The folder transformers' save_pretrained writes for this model: the legacy names
// (language_model.model.*, vision_tower.*) or, with `new_layout`, those of transformers >= 4.52
// (model.language_model.*, model.vision_tower.*, lm_head.weight).
void write_folder(const std::string& dir, const models::LlavaSettings& s, const models::LlamaConfig& text, models::LlavaModel& model,
                  bool new_layout = false) {
  fs::create_directories(dir);
  nlohmann::json config = {
      {"architectures", {"LlavaForConditionalGeneration"}}, {"model_type", "llava"}, {"image_token_index", s.image_token_id},
      {"projector_hidden_act", "gelu"}, {"vision_feature_layer", s.vision_feature_layer},
      {"vision_feature_select_strategy", s.vision_feature_select_strategy}, {"multimodal_projector_bias", s.projector_bias},
      {"text_config", models::llama_hf_config(text, "float32")},
      {"vision_config", {{"model_type", "clip_vision_model"}, {"hidden_size", s.vision.hidden_size},
                         {"intermediate_size", s.vision.intermediate_size}, {"num_hidden_layers", s.vision.num_layers},
                         {"num_attention_heads", s.vision.num_heads}, {"image_size", s.vision.image_size},
                         {"patch_size", s.vision.patch_size}, {"num_channels", s.vision.num_channels},
                         {"layer_norm_eps", s.vision.layer_norm_eps}, {"hidden_act", "quick_gelu"}}}};
  std::ofstream(dir + "/config.json") << config.dump(2) << "\n";
  std::map<std::string, io::serialization::TensorView> views;
  std::vector<at::Tensor> alive;
  const std::string text_prefix = "language_model.";
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    const bool in_text = name.rfind(text_prefix, 0) == 0;
    std::string hf = in_text ? models::llama_hf_name(name.substr(text_prefix.size())) : name;  // model.layers.0..., lm_head.weight
    if (!new_layout) {
      hf = in_text ? text_prefix + hf : hf;
    } else if (in_text) {
      hf = hf == "lm_head.weight" ? hf : "model.language_model." + hf.substr(std::string("model.").size());
    } else {
      hf = "model." + hf;
    }
    alive.push_back(item.value().detach().contiguous());
    views[hf] = {"F32", alive.back().sizes().vec(), static_cast<const uint8_t*>(alive.back().data_ptr()),
                 static_cast<size_t>(alive.back().nbytes())};
  }
  io::serialization::write_safetensors(dir + "/model.safetensors", views);
}

at::Tensor ids_of(const std::vector<std::vector<int64_t>>& rows) {
  at::Tensor ids = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())}, torch::kLong);
  for (int64_t b = 0; b < ids.size(0); ++b)
    for (int64_t t = 0; t < ids.size(1); ++t) ids[b][t] = rows[b][t];
  return ids;
}

// Two prompts with an image each: after the first token, and at the start.
std::vector<std::vector<int64_t>> prompts(const models::LlavaSettings& settings) {
  std::vector<std::vector<int64_t>> rows = {{3, 17, 42, 8, 21}, {7, 1, 30, 2, 5}};
  rows[0].insert(rows[0].begin() + 1, settings.tokens_per_image(), kImageToken);
  rows[1].insert(rows[1].begin(), settings.tokens_per_image(), kImageToken);
  return rows;
}

TEST(LlavaForward, LogitsAreTransformersLlava) {
  for (const auto& [layer, strategy] : std::vector<std::pair<int64_t, std::string>>{{-2, "default"}, {1, "full"}, {0, "default"}, {-1, "full"}}) {
    const models::LlavaSettings settings = tiny_settings(layer, strategy);
    const models::LlamaConfig text = testing::tiny_llama(/*tied=*/false, /*qwen3=*/false);
    const auto options = torch::TensorOptions().dtype(torch::kFloat);
    models::LlavaModel model(settings, std::make_shared<models::LlamaModel>(text, options), options);
    model.init_weights(0.2, 7);
    const auto rows = prompts(settings);
    const at::Tensor ids = ids_of(rows);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
    const at::Tensor pixels = torch::randn({2, 3, 8, 8}, generator, torch::kFloat);
    torch::NoGradGuard no_grad;
    const at::Tensor logits = model(parallel::Module::Tensors{ids, pixels})[0];

    const std::string dir = testing::scratch_dir() + "/hf";
    write_folder(dir, settings, text, model);
    const double diff = (logits - testing::llava_reference_logits(dir, rows, pixels, logits.size(2))).abs().max().item<double>();
    std::cout << "vision_feature_layer " << layer << " (" << strategy << "): max |megacpp - llava_forward.py| = " << diff
              << " (logits up to " << logits.abs().max().item<double>() << ")" << std::endl;
    EXPECT_LE(diff, 1e-4);
    // The images matter: other pixels, other logits.
    const at::Tensor other = model(parallel::Module::Tensors{ids, pixels + 1.0})[0];
    EXPECT_GT((other - logits).abs().max().item<double>(), 1e-3);
  }
}

// megacpp-convert: a folder of either of transformers' layouts imports into a checkpoint (the
// llava family, a Qwen3 language model); its export is the legacy folder with the same tensors,
// which the NumPy forward reads to megacpp's logits.
TEST(LlavaForward, ConvertImportsBothLayoutsAndExportsWhatItRead) {
  const models::LlavaSettings settings = tiny_settings(-2, "default");
  const models::LlamaConfig text = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  models::LlavaModel model(settings, std::make_shared<models::LlamaModel>(text, options), options);
  model.init_weights(0.2, 11);
  const std::string dir = testing::scratch_dir();
  for (const bool new_layout : {false, true}) {
    const std::string name = new_layout ? "new" : "legacy";
    write_folder(dir + "/" + name, settings, text, model, new_layout);
    const auto imported = testing::convert("import --input " + dir + "/" + name + " --save " + dir + "/" + name + "_ckpt");
    ASSERT_EQ(imported.status, 0) << imported.output;
    EXPECT_NE(imported.output.find("--model-type llava --language-model-type llama --num-layers 2"), std::string::npos) << imported.output;
    EXPECT_NE(imported.output.find("--qk-layernorm"), std::string::npos) << imported.output;
    const std::string out = dir + "/" + name + "_export";
    const auto exported = testing::convert("export --load " + dir + "/" + name + "_ckpt --output " + out);
    ASSERT_EQ(exported.status, 0) << exported.output;
    const auto folder = io::serialization::SafetensorsCheckpoint::open(out);
    size_t checked = 0;
    for (const auto& item : model.named_parameters()) {
      const bool in_text = item.key().rfind("language_model.", 0) == 0;
      const std::string hf = in_text ? "language_model." + models::llama_hf_name(item.key().substr(15)) : item.key();
      ASSERT_TRUE(folder.contains(hf)) << name << ": " << hf;
      const io::serialization::TensorView view = folder.tensor(hf);
      ASSERT_EQ(view.nbytes, item.value().nbytes()) << hf;
      EXPECT_EQ(std::memcmp(view.data, item.value().data_ptr(), view.nbytes), 0) << name << ": " << hf;
      ++checked;
    }
    EXPECT_EQ(folder.names().size(), checked) << name;
  }
  const auto rows = prompts(settings);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor pixels = torch::randn({2, 3, 8, 8}, generator, torch::kFloat);
  torch::NoGradGuard no_grad;
  const at::Tensor logits = model(parallel::Module::Tensors{ids_of(rows), pixels})[0];
  const double diff = (logits - testing::llava_reference_logits(dir + "/new_export", rows, pixels, logits.size(2))).abs().max().item<double>();
  std::cout << "exported folder: max |megacpp - llava_forward.py| = " << diff << std::endl;
  EXPECT_LE(diff, 1e-4);
}

TEST(LlavaForward, ImageTokensMustMatchTheImages) {
  const models::LlavaSettings settings = tiny_settings(-2, "default");
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  models::LlavaModel model(settings, std::make_shared<models::LlamaModel>(testing::tiny_llama(false, false), options), options);
  model.init_weights(0.2, 7);
  const at::Tensor ids = torch::full({1, 6}, kImageToken, torch::kLong);
  try {
    model(parallel::Module::Tensors{ids, torch::zeros({1, 3, 8, 8})});
    FAIL() << "6 image tokens for one image of 4 features";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the text has 6 image tokens (id 49) but 1 image(s) give 4 features (4 each)"),
              std::string::npos)
        << e.what();
  }
  // Text alone: the tower still runs, on no image, and the logits are the language model's.
  const at::Tensor text_ids = torch::tensor({{3, 17, 42}}, torch::kLong);
  EXPECT_EQ(model(text_ids).sizes(), (std::vector<int64_t>{1, 3, 50}));
  const at::Tensor four = torch::full({1, 4}, kImageToken, torch::kLong);
  try {
    model(parallel::Module::Tensors{four, torch::zeros({1, 3, 16, 16})});
    FAIL() << "an image of another size";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("pixel values must be [images, 3, 8, 8], got [1, 3, 16, 16]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(models::LlavaModel(tiny_settings(-2, "cls"), std::make_shared<models::LlamaModel>(testing::tiny_llama(false, false), options),
                                  options),
               std::invalid_argument);
}

}  // namespace
}  // namespace megacpp
