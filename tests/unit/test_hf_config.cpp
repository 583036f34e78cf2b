// config.json <-> LlamaConfig and HF weight names (models/llama/llama_hf.h): round trips, the
// keys transformers reads, and refusals that name the file and the key.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "models/llama/llama_hf.h"
#include "models/llama/llama_model.h"
#include "tests/support/tiny_llama.h"

namespace megacpp::models {
namespace {

using nlohmann::json;

models::LlamaConfig tiny(bool tied, bool qwen3) { return testing::tiny_llama(tied, qwen3); }
models::LlamaConfig tiny_qwen2(bool tied) {
  models::LlamaConfig c = testing::tiny_llama(tied, false);
  c.add_qkv_bias = true;
  return c;
}
models::LlamaConfig tiny_mistral() {
  models::LlamaConfig c = testing::tiny_llama(false, false);
  c.sliding_window = 5;
  return c;
}

std::string error_of(const json& config) {
  try {
    llama_config_from_hf(config, "ckpt/config.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(HfConfig, RoundTripsEveryVariant) {
  models::LlamaConfig defaults;  // 0 = resolved defaults (ffn, query groups, head dim)
  defaults.max_position_embeddings = 128;
  for (const auto& c : {defaults, tiny(true, false), tiny(false, false), tiny(true, true), tiny(false, true), tiny_qwen2(true),
                        tiny_qwen2(false), tiny_mistral()}) {
    json j = llama_hf_config(c, "float32");
    EXPECT_EQ(llama_config_from_hf(j, "config.json"), c) << j.dump();
    EXPECT_EQ(llama_config_from_hf(json::parse(j.dump()), "config.json"), c);  // through text, as on disk
  }
}

TEST(HfConfig, WritesTheKeysTransformersReads) {
  json llama = llama_hf_config(tiny(false, false), "bfloat16");
  EXPECT_EQ(llama["architectures"], json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(llama["model_type"], "llama");
  EXPECT_EQ(llama["head_dim"], 8);
  EXPECT_EQ(llama["num_key_value_heads"], 2);
  EXPECT_EQ(llama["intermediate_size"], 40);
  EXPECT_EQ(llama["tie_word_embeddings"], false);
  EXPECT_EQ(llama["mlp_bias"], false);
  EXPECT_EQ(llama["torch_dtype"], "bfloat16");
  EXPECT_TRUE(llama["rope_scaling"].is_null());

  json qwen3 = llama_hf_config(tiny(true, true), "float32");
  EXPECT_EQ(qwen3["architectures"], json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(qwen3["model_type"], "qwen3");
  EXPECT_EQ(qwen3["head_dim"], 12);
  EXPECT_EQ(qwen3["use_sliding_window"], false);
  EXPECT_FALSE(qwen3.contains("mlp_bias"));

  json qwen2 = llama_hf_config(tiny_qwen2(false), "float32");
  EXPECT_EQ(qwen2["architectures"], json::array({"Qwen2ForCausalLM"}));
  EXPECT_EQ(qwen2["model_type"], "qwen2");
  EXPECT_EQ(qwen2["use_sliding_window"], false);
  EXPECT_FALSE(qwen2.contains("attention_bias")) << "Qwen2Config has no such key: its q/k/v biases are always there";
  // No Hugging Face model has q/k/v biases and q/k norms, or experts.
  models::LlamaConfig both = tiny_qwen2(false);
  both.qk_layernorm = true;
  try {
    llama_hf_config(both, "float32");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--add-qkv-bias with --qk-layernorm"), std::string::npos) << e.what();
  }

  json mistral = llama_hf_config(tiny_mistral(), "float32");
  EXPECT_EQ(mistral["architectures"], json::array({"MistralForCausalLM"}));
  EXPECT_EQ(mistral["model_type"], "mistral");
  EXPECT_EQ(mistral["sliding_window"], 5);
  EXPECT_FALSE(mistral.contains("attention_bias")) << "MistralConfig has no such key";
  models::LlamaConfig windowed_qwen = tiny_qwen2(false);
  windowed_qwen.sliding_window = 5;
  EXPECT_THROW(llama_hf_config(windowed_qwen, "float32"), std::invalid_argument);

  models::LlamaConfig defaults;
  defaults.max_position_embeddings = 64;
  EXPECT_EQ(llama_hf_config(defaults, "float32")["intermediate_size"], 4 * defaults.hidden_size);

  EXPECT_THROW(llama_hf_config(tiny(true, false), "float16"), std::invalid_argument);
  defaults.max_position_embeddings = 0;
  EXPECT_THROW(llama_hf_config(defaults, "float32"), std::invalid_argument);
}

TEST(HfConfig, AppliesTransformersDefaults) {
  json j = llama_hf_config(tiny(false, true), "float32");
  for (auto key : {"head_dim", "rope_theta", "rms_norm_eps", "tie_word_embeddings"}) j.erase(key);
  models::LlamaConfig c = llama_config_from_hf(j, "config.json");
  EXPECT_EQ(c.head_dim(), 128);  // Qwen3Config's default
  EXPECT_EQ(c.kv_heads(), 2);  // as written
  EXPECT_EQ(c.rotary_base, 10000.0);
  EXPECT_EQ(c.norm_epsilon, 1e-6);
  EXPECT_FALSE(c.tie_embeddings);

  json llama = llama_hf_config(tiny(false, false), "float32");
  llama.erase("head_dim");
  llama.erase("num_key_value_heads");
  EXPECT_EQ(llama_config_from_hf(llama, "config.json").head_dim(), 8);
  EXPECT_EQ(llama_config_from_hf(llama, "config.json").kv_heads(), 4) << "LlamaConfig: one per head";
  // The shape's defaults are transformers' LlamaConfig's and Qwen3Config's.
  for (auto key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"}) {
    j.erase(key);
  }
  c = llama_config_from_hf(j, "config.json");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.ffn(), 22016);
  EXPECT_EQ(c.kv_heads(), 32) << "Qwen3Config's num_key_value_heads=32, not the heads";
  const models::LlamaConfig qwen2 = llama_config_from_hf({{"model_type", "qwen2"}, {"attention_bias", true}}, "config.json");
  EXPECT_TRUE(qwen2.add_qkv_bias) << "Qwen2's biases whatever attention_bias says";
  EXPECT_EQ(qwen2.head_dim(), 128) << "Qwen2Config: hidden 4096 / 32 heads";
  EXPECT_EQ(qwen2.max_position_embeddings, 32768);
  // MistralConfig's defaults: 8 key/value heads, a window of 4096; null: no window (v0.2 on).
  const models::LlamaConfig mistral = llama_config_from_hf({{"model_type", "mistral"}}, "config.json");
  EXPECT_EQ(mistral.sliding_window, 4096);
  EXPECT_EQ(mistral.kv_heads(), 8);
  EXPECT_EQ(mistral.ffn(), 14336);
  EXPECT_EQ(llama_config_from_hf({{"model_type", "mistral"}, {"sliding_window", nullptr}}, "config.json").sliding_window, 0);
  EXPECT_NE(error_of({{"model_type", "mistral"}, {"sliding_window", -3}}).find("key 'sliding_window'"), std::string::npos);
  const models::LlamaConfig bare = llama_config_from_hf({{"model_type", "llama"}}, "config.json");
  EXPECT_EQ(bare.vocab_size, 32000);
  EXPECT_EQ(bare.hidden_size, 4096);
  EXPECT_EQ(bare.ffn(), 11008);
  EXPECT_EQ(bare.num_layers, 32);
  EXPECT_EQ(bare.kv_heads(), 32);
  // transformers v5 writes rope_parameters instead of rope_theta.
  llama.erase("rope_theta");
  llama["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 250.0}};
  EXPECT_EQ(llama_config_from_hf(llama, "config.json").rotary_base, 250.0);
}

TEST(HfConfig, RefusesUnsupportedFeaturesNamingFileAndKey) {
  const json llama = llama_hf_config(tiny(false, false), "float32");
  const json qwen3 = llama_hf_config(tiny(false, true), "float32");
  struct Case {
    json base;
    std::string key;
    json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {llama, "rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}, "key 'rope_scaling'"},
      {llama, "rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}}, "key 'rope_parameters."},
      {llama, "attention_bias", true, "key 'attention_bias': true is not supported"},
      {llama, "mlp_bias", true, "key 'mlp_bias'"},
      {llama, "hidden_act", "gelu", "key 'hidden_act': \"gelu\""},
      {llama, "partial_rotary_factor", 0.5, "key 'partial_rotary_factor'"},
      {llama, "attention_dropout", 0.1, "key 'attention_dropout'"},
      {llama, "architectures", json::array({"MistralForCausalLM"}), "key 'architectures'"},
      {llama, "architectures", json::array({"Qwen3ForCausalLM"}), "key 'architectures'"},
      {llama, "model_type", "gemma", "key 'model_type': \"gemma\""},
      {llama, "model_type", "mistral", "key 'architectures': [\"LlamaForCausalLM\"]: expected [\"MistralForCausalLM\"]"},
      {qwen3, "use_sliding_window", true, "key 'use_sliding_window'"},
      {qwen3, "layer_types", json::array({"full_attention", "sliding_attention"}), "key 'layer_types'"},
      {llama, "num_hidden_layers", "two", "key 'num_hidden_layers': expected a positive integer"},
      {llama, "hidden_size", 0, "key 'hidden_size'"},
      {llama, "tie_word_embeddings", "yes", "key 'tie_word_embeddings'"},
      {llama, "num_key_value_heads", 3, "cannot build: --num-attention-heads (4) must be divisible"},
  };
  for (const auto& c : cases) {
    json j = c.base;
    j[c.key] = c.value;
    const std::string error = error_of(j);
    EXPECT_EQ(error.rfind("ckpt/config.json: ", 0), 0u) << c.key << ": " << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.key << ": " << error;
  }
  EXPECT_NE(error_of(json::array()).find("expected a JSON object"), std::string::npos);
}

TEST(HfConfig, MapsEveryParameterNameBothWays) {
  // Per layer 2 norms + 4 attention + 3 MLP weights, and Qwen3's 2 q/k norms or Qwen2's 3 q/k/v
  // biases; embed, norm, lm_head.
  for (const auto& [config, per_layer] : {std::pair{tiny(false, true), 11}, std::pair{tiny_qwen2(false), 12}}) {
    models::LlamaModel model(config, torch::TensorOptions().device(torch::kMeta));
    int count = 0;
    for (auto& item : model.named_parameters()) {
      const std::string hf = llama_hf_name(item.key());
      EXPECT_EQ(llama_name_from_hf(hf), item.key());
      EXPECT_EQ(hf == "lm_head.weight" || hf.rfind("model.", 0) == 0, true) << hf;
      ++count;
    }
    EXPECT_EQ(count, 2 + 2 * per_layer + 1);
  }
  EXPECT_EQ(llama_hf_name("layers.0.self_attn.v_proj.bias"), "model.layers.0.self_attn.v_proj.bias");
  EXPECT_EQ(llama_hf_name("layers.1.self_attn.k_norm.weight"), "model.layers.1.self_attn.k_norm.weight");
  EXPECT_EQ(llama_name_from_hf("model.embed_tokens.weight"), "embed_tokens.weight");
}

TEST(HfConfig, RefusesUnknownWeightNames) {
  for (auto name : {"model.layers.0.self_attn.rotary_emb.inv_freq", "layers.0.mlp.up_proj.weight",
                    "model.lm_head.weight", "model.layers.01.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.bias",
                    "transformer.wte.weight"}) {
    try {
      llama_name_from_hf(name);
      ADD_FAILURE() << name;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + name + "' is not a weight of a Llama/Mistral/Qwen2/Qwen3 model"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(llama_hf_name("model.embed_tokens.weight"), std::invalid_argument);
  EXPECT_THROW(llama_hf_name("layers.0.self_attn.o_proj.bias"), std::invalid_argument);
}

TEST(HfConfig, HeadDimensionMayDifferFromHiddenOverHeads) {
  models::LlamaConfig c = tiny(true, true);
  c.hidden_size = 30;  // not divisible by 4 heads: fine with --kv-channels
  EXPECT_NO_THROW(c.validate());
  models::LlamaModel model(c, torch::TensorOptions().device(torch::kMeta));
  auto params = model.named_parameters();
  EXPECT_EQ(params["layers.0.self_attn.q_proj.weight"].sizes(), (std::vector<int64_t>{48, 30}));
  EXPECT_EQ(params["layers.0.self_attn.k_proj.weight"].sizes(), (std::vector<int64_t>{24, 30}));
  EXPECT_EQ(params["layers.0.self_attn.o_proj.weight"].sizes(), (std::vector<int64_t>{30, 48}));
  EXPECT_EQ(params["layers.0.self_attn.q_norm.weight"].sizes(), (std::vector<int64_t>{12}));
  c.kv_channels = 7;
  try {
    c.validate();
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-channels"), std::string::npos) << e.what();
  }
  c.kv_channels = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);  // 30 % 4 without --kv-channels
  EXPECT_EQ(models::LlamaModel(tiny(true, true), torch::TensorOptions().device(torch::kMeta)).module_classes().front().first,
            "Qwen3DecoderLayer");
}

}  // namespace
}  // namespace megacpp::models
