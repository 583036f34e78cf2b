// The llava family: its flags (and the language model's, with that family's defaults), its args
// and Hugging Face config both ways, the weight names of both of transformers' layouts, and the
// refusals, each naming its flag or key.
#include <gtest/gtest.h>

#include <stdexcept>

#include <torch/torch.h>

#include "settings/arguments.h"
#include "models/llama/llama_config.h"
#include "models/llava/llava_config.h"
#include "models/registry.h"

namespace megacpp {
namespace {

using nlohmann::json;

const std::vector<std::string> kTiny = {"--mock-data",        "--model-type", "llava", "--tokenizer-type", "NullTokenizer",
                                        "--vocab-size",       "99",           "--seq-length", "32",        "--num-layers",
                                        "3",                  "--qk-layernorm", "--vision-num-layers", "3",
                                        "--vision-hidden-size", "16",         "--vision-num-attention-heads", "2",
                                        "--img-h",            "8",            "--img-w",   "8",           "--patch-dim", "4"};

settings::TrainingArguments parse_llava(std::vector<std::string> extra, std::vector<std::string> flags = kTiny) {
  flags.insert(flags.end(), extra.begin(), extra.end());
  std::vector<const char*> argv{"megacpp-train"};
  for (auto& f : flags) argv.push_back(f.c_str());
  return settings::parse_arguments(static_cast<int>(argv.size()), argv.data());
}

std::string llava_error_of(std::vector<std::string> extra) {
  try {
    parse_llava(std::move(extra));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

const models::LlavaConfig& llava(const settings::TrainingArguments& a) { return dynamic_cast<const models::LlavaConfig&>(*a.model); }

TEST(LlavaFamily, FlagsBuildTheModelWithTheLanguageFamilysDefaults) {
  const settings::TrainingArguments a = parse_llava({"--freeze-ViT"});
  const models::LlavaConfig& c = llava(a);
  const auto& text = dynamic_cast<const models::LlamaConfig&>(*c.text);
  EXPECT_EQ(text.num_layers, 3);
  EXPECT_TRUE(text.qk_layernorm);
  EXPECT_EQ(text.hidden_size, 64) << "the llama family's default";
  EXPECT_EQ(c.settings.vision.intermediate_size, 64) << "4 x --vision-hidden-size";
  EXPECT_EQ(c.settings.tokens_per_image(), 4) << "(8 / 4)^2 patches, the class token dropped";
  EXPECT_EQ(c.settings.image_token_id, 127) << "the last id of the vocabulary padded to 128";
  EXPECT_TRUE(c.settings.freeze_vision_tower);

  const models::ModelFamily& family = models::model_family("llava");
  EXPECT_EQ(family.config_from_args(c.to_args(), "ckpt")->to_args(), c.to_args());
  std::vector<std::string> flags = {"--mock-data", "--model-type", "llava", "--tokenizer-type", "NullTokenizer", "--vocab-size", "99",
                                    "--seq-length", "32"};
  std::istringstream words(c.to_flags());
  for (std::string w; words >> w;) flags.push_back(w);
  EXPECT_EQ(parse_llava({}, flags).model->to_args(), c.to_args()) << c.to_flags();
  EXPECT_FALSE(c.checkpoint_must_match("freeze_vit"));
  EXPECT_TRUE(c.checkpoint_must_match("vision_hidden_size"));
  EXPECT_FALSE(c.checkpoint_must_match("max_position_embeddings")) << "the language model's own rule";

  const auto model = family.build(c, torch::TensorOptions().device(torch::kMeta));
  std::map<std::string, at::Tensor> params;
  for (const auto& item : model->named_parameters()) params[item.key()] = item.value();
  EXPECT_EQ(params.at("multi_modal_projector.linear_1.weight").sizes(), (std::vector<int64_t>{64, 16}));
  EXPECT_FALSE(params.at("vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight").requires_grad()) << "--freeze-ViT";
  EXPECT_TRUE(params.at("multi_modal_projector.linear_1.weight").requires_grad());
  EXPECT_TRUE(params.at("language_model.layers.2.self_attn.q_norm.weight").requires_grad());
}

TEST(LlavaFamily, RefusesBadFlagsByName) {
  EXPECT_NE(llava_error_of({"--language-model-type", "gpt"}).find("--qk-layernorm is not read by --language-model-type gpt"), std::string::npos);
  EXPECT_NE(llava_error_of({"--language-model-type", "llava"}).find("the language model cannot itself be a LLaVA model"), std::string::npos);
  EXPECT_NE(llava_error_of({"--language-model-type", "nope"}).find("--language-model-type nope: --model-type 'nope' is not registered"),
            std::string::npos);
  EXPECT_NE(llava_error_of({"--img-w", "16"}).find("--img-w 16 must equal --img-h 8"), std::string::npos);
  EXPECT_NE(llava_error_of({"--patch-dim", "3"}).find("--img-h (8) must be a positive multiple of --patch-dim (3)"), std::string::npos);
  EXPECT_NE(llava_error_of({"--image-token-id", "128"}).find("--image-token-id 128 is not in the language model's vocabulary of 128"),
            std::string::npos);
  EXPECT_NE(llava_error_of({"--vision-feature-layer", "4"}).find("--vision-feature-layer 4 is not a hidden state of a 3-layer vision tower"),
            std::string::npos);
  EXPECT_NE(llava_error_of({"--vision-feature-select-strategy", "cls"}).find("--vision-feature-select-strategy must be default"),
            std::string::npos);
  EXPECT_NE(llava_error_of({"--vision-model-type", "siglip"}).find("--vision-model-type siglip: only clip is implemented"), std::string::npos);
  EXPECT_NE(llava_error_of({"--vision-num-attention-heads", "3"}).find("--vision-hidden-size (16) must be a positive multiple of"),
            std::string::npos);
  EXPECT_NE(llava_error_of({"--num-channels", "2"}).find("--num-channels must be 1 (grey) or 3 (RGB), got 2"), std::string::npos);
  EXPECT_NE(llava_error_of({"--image-mean", "0.5"}).find("--image-mean applies to image-text data (--data-path FILE.jsonl) only"),
            std::string::npos)
      << "with --mock-data it would do nothing";
  // A language model that takes no input embeddings is refused when built.
  std::vector<std::string> gpt = {"--mock-data", "--model-type", "llava", "--language-model-type", "gpt", "--img-h", "8", "--img-w", "8",
                                  "--patch-dim", "4"};
  const settings::TrainingArguments a = parse_llava({}, gpt);
  try {
    models::model_family("llava").build(*a.model, torch::TensorOptions().device(torch::kMeta));
    FAIL() << "GPT takes no inputs_embeds";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the language model (GPT2LMHeadModel) takes no input embeddings"), std::string::npos) << e.what();
  }
}

TEST(LlavaFamily, HuggingFaceConfigAndNamesBothWays) {
  const settings::TrainingArguments a = parse_llava({"--untie-embeddings-and-output-weights", "--vision-feature-layer", "1",
                                     "--vision-feature-select-strategy", "full"});
  const models::LlavaConfig& c = llava(a);
  const models::ModelFamily& family = models::model_family("llava");
  const json hf = family.to_hf_config(c, "float32");
  EXPECT_EQ(hf.at("architectures"), json::array({"LlavaForConditionalGeneration"}));
  EXPECT_EQ(hf.at("image_token_index"), 127);
  EXPECT_EQ(hf.at("vision_feature_layer"), 1);
  EXPECT_EQ(hf.at("text_config").at("architectures"), json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(hf.at("vision_config").at("hidden_act"), "quick_gelu");
  EXPECT_EQ(hf.at("tie_word_embeddings"), false);
  EXPECT_EQ(family.from_hf_config(hf, "config.json")->to_args(), c.to_args());

  const auto model = family.build(c, torch::TensorOptions().device(torch::kMeta));
  for (const auto& item : model->named_parameters()) {
    const std::string hf_name = family.to_hf_tensor(c, item.key()).name;
    EXPECT_EQ(family.from_hf_tensor(c, hf_name), item.key()) << hf_name;
  }
  EXPECT_EQ(family.to_hf_tensor(c, "language_model.layers.0.self_attn.q_proj.weight").name,
            "language_model.model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(family.to_hf_tensor(c, "language_model.lm_head.weight").name, "language_model.lm_head.weight");
  // transformers >= 4.52's layout.
  EXPECT_EQ(family.from_hf_tensor(c, "model.language_model.layers.0.self_attn.q_proj.weight"),
            "language_model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(family.from_hf_tensor(c, "lm_head.weight"), "language_model.lm_head.weight");
  EXPECT_EQ(family.from_hf_tensor(c, "model.vision_tower.vision_model.pre_layrnorm.bias"), "vision_tower.vision_model.pre_layrnorm.bias");
  EXPECT_EQ(family.from_hf_tensor(c, "model.multi_modal_projector.linear_2.weight"), "multi_modal_projector.linear_2.weight");
  EXPECT_EQ(family.from_hf_tensor(c, "vision_tower.vision_model.embeddings.position_ids"), std::nullopt);
  EXPECT_THROW(family.from_hf_tensor(c, "vision_tower.vision_model.encoder.layers.0.mlp.fc3.weight"), std::invalid_argument);
  EXPECT_THROW(family.from_hf_tensor(c, "language_model.model.layers.0.bogus.weight"), std::invalid_argument);
}

TEST(LlavaFamily, HuggingFaceConfigDefaultsAndRefusals) {
  const models::ModelFamily& family = models::model_family("llava");
  // llava-1.5's config keeps only what differs from the defaults; tie_word_embeddings at the top.
  const json sparse = {{"model_type", "llava"}, {"tie_word_embeddings", true},
                       {"text_config", {{"model_type", "llama"}, {"vocab_size", 32064}, {"num_hidden_layers", 2}}}};
  const auto c = std::dynamic_pointer_cast<const models::LlavaConfig>(family.from_hf_config(sparse, "config.json"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->settings.vision.num_layers, 24) << "LlavaConfig's default CLIP ViT-L/14-336";
  EXPECT_EQ(c->settings.vision.image_size, 336);
  EXPECT_EQ(c->settings.tokens_per_image(), 576);
  EXPECT_EQ(c->settings.image_token_id, 32000);
  EXPECT_EQ(c->settings.vision_feature_layer, -2);
  EXPECT_TRUE(dynamic_cast<const models::LlamaConfig&>(*c->text).tie_embeddings);

  auto error_of_hf = [&](const json& patch) {
    json config = sparse;
    config.merge_patch(patch);
    try {
      family.from_hf_config(config, "dir/config.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of_hf({{"vision_config", {{"model_type", "siglip_vision_model"}}}})
                .find("dir/config.json: vision_config: key 'model_type': \"siglip_vision_model\" is not supported"),
            std::string::npos);
  EXPECT_NE(error_of_hf({{"vision_config", {{"hidden_act", "gelu"}}}}).find("vision_config: key 'hidden_act'"), std::string::npos);
  EXPECT_NE(error_of_hf({{"vision_feature_layer", {-2, -5}}}).find("key 'vision_feature_layer': [-2,-5] is not supported"),
            std::string::npos);
  EXPECT_NE(error_of_hf({{"projector_hidden_act", "relu"}}).find("key 'projector_hidden_act'"), std::string::npos);
  EXPECT_NE(error_of_hf({{"text_config", {{"hidden_act", "gelu"}}}}).find("dir/config.json: text_config: key 'hidden_act'"),
            std::string::npos);
  EXPECT_NE(error_of_hf({{"text_config", {{"vocab_size", 32000}}}}).find("dir/config.json: key 'image_token_id': 32000 is not in text_config's vocabulary of 32000"),
            std::string::npos);
}

}  // namespace
}  // namespace megacpp
