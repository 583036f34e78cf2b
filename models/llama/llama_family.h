// The "llama" model family: Llama-, Qwen2- and Qwen3-style decoders (Note [Model families]).
#pragma once

#include "models/model_family.h"

namespace megacpp::models {

class LlamaFamily : public ModelFamily {
 public:
  std::string name() const override { return "llama"; }
  std::vector<ModelFlag> flags() const override;
  std::shared_ptr<const ModelConfig> config_from_flags(const ModelFlagValues& flags,
                                                       const ModelContext& context) const override;
  std::shared_ptr<const ModelConfig> config_from_args(const nlohmann::json& args, const std::string& where) const override;
  std::map<std::string, std::string> megatron_architecture() const override {
    return {{"position-embedding-type", "rope"},
            {"normalization", "RMSNorm"},
            {"swiglu", "true"},
            {"disable-bias-linear", "true"}};
  }
  std::shared_ptr<LanguageModel> build(const ModelConfig& config, const at::TensorOptions& options) const override;

  // LlamaForCausalLM ("llama"), with --sliding-window MistralForCausalLM ("mistral"), with
  // --add-qkv-bias Qwen2ForCausalLM ("qwen2"), with
  // --qk-layernorm Qwen3ForCausalLM ("qwen3"), and with experts Qwen3MoeForCausalLM ("qwen3_moe").
  std::vector<std::string> hf_model_types() const override { return {"llama", "mistral", "qwen2", "qwen3", "qwen3_moe"}; }
  nlohmann::json to_hf_config(const ModelConfig& config, const std::string& torch_dtype) const override;
  std::shared_ptr<const ModelConfig> from_hf_config(const nlohmann::json& config, const std::string& path) const override;
  HfTensorName to_hf_tensor(const ModelConfig& config, const std::string& fqn) const override;
  std::optional<std::string> from_hf_tensor(const ModelConfig& config, const std::string& hf_name) const override;
};

}  // namespace megacpp::models
