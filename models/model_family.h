// Note [Model families]
// A model family (in the spirit of torchtitan's TrainSpec) is one folder, models/<family>/,
// that owns everything particular to a kind of model: the flags it reads, its config (from
// those flags, from a checkpoint's `args`, from a Hugging Face config.json), its builder, and
// its Hugging Face weight names. It registers itself once by name (MEGACPP_REGISTER_MODEL_FAMILY);
// the trainer, the checkpoint code and megacpp-convert reach it only through ModelFamily and
// ModelConfig, so a family built outside megacpp (a user's executable, or a shared library
// loaded with --model-library) is as good as a built-in one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/language_model.h"
#include "models/model_flags.h"

namespace megacpp::models {

// What a model that reads images takes with them: the placeholder token each image feature
// replaces in the text, how many an image takes, and the images' shape (square).
struct ImageInputs {
  int64_t token_id = 0;
  int64_t tokens_per_image = 0;
  int64_t channels = 3;
  int64_t size = 0;
};

// The shape of one model; only its family knows the concrete type.
class ModelConfig {
 public:
  virtual ~ModelConfig() = default;
  // The name of the family that builds it (--model-type).
  virtual std::string model_type() const = 0;
  // Its fields under Megatron's argument names (a flat object of numbers, booleans and
  // strings), as a checkpoint's `args` records them.
  virtual nlohmann::json to_args() const = 0;
  // The megacpp-train flags that build it, e.g. "--num-layers 2 --hidden-size 64".
  virtual std::string to_flags() const = 0;
  // Whether a checkpoint's value of to_args() field `field` must equal this config's for the
  // checkpoint to load into the model (--load refuses it otherwise). Fields that change no
  // weight nor what the weights compute may differ: return false for them.
  virtual bool checkpoint_must_match(const std::string& field) const { return true; }
  // A model whose forward takes {ids, pixel values [images, channels, size, size]} (image-text
  // data) says what it needs; a text-only model has none.
  virtual std::optional<ImageInputs> image_inputs() const { return std::nullopt; }
};

// What the rest of the run decides for the model: the vocabulary (the tokenizer's, padded)
// and the sequence length.
struct ModelContext {
  int64_t vocab_size = 0;
  int64_t seq_length = 0;
};

// A weight's Hugging Face name, whether it is stored transposed there (GPT-2's Conv1D keeps
// [in, out] where a Linear keeps [out, in]), and what is added to it there (a zero-centered
// norm weight, which scales by 1 + weight, is stored as 1 + weight).
struct HfTensorName {
  std::string name;
  bool transposed = false;
  double offset = 0.0;
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  virtual std::string name() const = 0;  // --model-type
  // The flags it reads (shown in --help; a model flag it does not list is refused when given).
  virtual std::vector<ModelFlag> flags() const = 0;
  // Throws std::invalid_argument naming the flag that is wrong.
  virtual std::shared_ptr<const ModelConfig> config_from_flags(const ModelFlagValues& flags,
                                                               const ModelContext& context) const = 0;
  // From a checkpoint's args (ModelConfig::to_args); `where` names the checkpoint in errors.
  virtual std::shared_ptr<const ModelConfig> config_from_args(const nlohmann::json& args,
                                                              const std::string& where) const = 0;
  // The values of Megatron's architecture flags that describe the model this family builds,
  // by flag name without "--": "position-embedding-type" (learned_absolute|rope),
  // "normalization" (LayerNorm|RMSNorm), "swiglu" and "disable-bias-linear" (true|false).
  // A command line without --model-type builds the family they match (Note [Megatron
  // architecture] in settings/megatron_architecture.h). Empty: selected by --model-type only.
  virtual std::map<std::string, std::string> megatron_architecture() const { return {}; }
  // `options` carries the device (torch::kMeta for meta-device init).
  virtual std::shared_ptr<LanguageModel> build(const ModelConfig& config, const at::TensorOptions& options) const = 0;

  // Hugging Face. A family without a mapping keeps these defaults, which refuse by name.
  // The config.json model_type values it reads.
  virtual std::vector<std::string> hf_model_types() const { return {}; }
  // config.json for `config`; torch_dtype is "float32" or "bfloat16".
  virtual nlohmann::json to_hf_config(const ModelConfig& config, const std::string& torch_dtype) const;
  // Refuses, naming `path` and the key, what the family cannot compute the same way.
  virtual std::shared_ptr<const ModelConfig> from_hf_config(const nlohmann::json& config, const std::string& path) const;
  // The Hugging Face name of parameter `fqn`.
  virtual HfTensorName to_hf_tensor(const ModelConfig& config, const std::string& fqn) const;
  // The parameter a tensor of a Hugging Face folder becomes; nullopt for one the model does
  // not keep (a tied lm_head, a saved attention mask). Throws std::invalid_argument for a name
  // the family does not know.
  virtual std::optional<std::string> from_hf_tensor(const ModelConfig& config, const std::string& hf_name) const;

  // The family's ModelConfig subclass; throws std::invalid_argument for another family's.
  template <class Config>
  static const Config& config_as(const ModelConfig& config) {
    if (auto* c = dynamic_cast<const Config*>(&config)) return *c;
    throw std::invalid_argument("a '" + config.model_type() + "' config was given to another model family");
  }
};

}  // namespace megacpp::models
