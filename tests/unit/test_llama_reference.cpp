// The Llama model against an independent NumPy forward pass of Hugging Face's
// LlamaForCausalLM (tests/reference/llama_reference.py), for tied and untied embeddings.
#include <gtest/gtest.h>

#include <fstream>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "tests/support/distributed_test.h"

namespace megacpp::models {
namespace {

void write_raw(const std::string& path, const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

std::string hf_name(const std::string& name) { return name.rfind("lm_head", 0) == 0 ? name : "model." + name; }

void check_against_reference(bool tied) {
  LlamaConfig config;
  config.vocab_size = 50;
  config.hidden_size = 32;
  config.ffn_hidden_size = 40;
  config.num_layers = 2;
  config.num_attention_heads = 4;
  config.num_query_groups = 2;
  config.max_position_embeddings = 12;
  config.rotary_base = 500.0;
  config.norm_epsilon = 1e-6;
  config.tie_embeddings = tied;
  auto model = std::make_shared<LlamaModel>(config, torch::TensorOptions().dtype(torch::kFloat));
  model->init_weights(0.2, 7);
  {
    torch::NoGradGuard no_grad;  // norms away from 1 so their weights matter
    for (auto& item : model->named_parameters()) {
      if (item.key().find("norm") != std::string::npos) item.value().uniform_(0.5, 1.5);
    }
  }
  torch::manual_seed(3);
  at::Tensor ids = torch::randint(config.vocab_size, {2, 12}, torch::kLong);
  at::Tensor logits = (*model)(ids).detach();

  const std::string dir = testing::scratch_dir();
  std::ofstream tensors(dir + "/tensors.json");
  tensors << "{";
  bool first = true;
  for (auto& item : model->named_parameters()) {
    write_raw(dir + "/" + hf_name(item.key()) + ".f32", item.value().detach());
    tensors << (first ? "" : ",") << "\"" << hf_name(item.key()) << "\": " << item.value().sizes();
    first = false;
  }
  tensors << "}";
  tensors.close();
  std::ofstream(dir + "/config.json")
      << "{\"hidden_size\": 32, \"intermediate_size\": 40, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
      << " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-6, \"rope_theta\": 500.0, \"vocab_size\": 50,"
      << " \"tie_word_embeddings\": " << (tied ? "true" : "false") << ", \"batch\": 2, \"seq\": 12}";
  write_raw(dir + "/input_ids.i64", ids);
  write_raw(dir + "/logits.f32", logits);
  auto result = testing::run_command("/usr/bin/python3 " MEGACPP_SOURCE_DIR "/tests/reference/llama_reference.py " + dir);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("max |megacpp - reference|"), std::string::npos) << result.output;
}

TEST(LlamaReference, TiedEmbeddingsMatchHuggingFaceMath) { check_against_reference(true); }
TEST(LlamaReference, UntiedEmbeddingsMatchHuggingFaceMath) { check_against_reference(false); }

}  // namespace
}  // namespace megacpp::models
