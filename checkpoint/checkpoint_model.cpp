#include "checkpoint/checkpoint_model.h"

#include <stdexcept>

#include <torch/torch.h>

#include "checkpoint/model_args.h"
#include "models/registry.h"
#include "io/serialization/atomic_file.h"

namespace megacpp::checkpoint {

std::shared_ptr<const models::ModelConfig> checkpoint_model(const CheckpointReader& reader) {
  const nlohmann::json args = args_json(reader.object("args"));
  const auto type = args.find("model_type");
  const std::string model_type = type != args.end() && type->is_string() ? type->get<std::string>() : models::kDefaultModelType;
  return models::model_family(model_type).config_from_args(args, reader.dir());
}

std::shared_ptr<models::LanguageModel> load_checkpoint_model(const CheckpointReader& reader) {
  const auto config = checkpoint_model(reader);
  auto model = models::create_model(*config, torch::TensorOptions().dtype(torch::kFloat));
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const std::string key = reader.format().model_key(item.key());
    if (!reader.tensors().has(key)) throw std::runtime_error(reader.dir() + ": no weight '" + item.key() + "' (key '" + key + "')");
    const at::Tensor saved = reader.tensors().read_tensor(key);
    if (saved.sizes() != item.value().sizes()) {
      throw std::runtime_error(reader.dir() + ": '" + item.key() + "' has shape " + io::serialization::shape_string(saved.sizes().vec()) +
                               ", the model needs " + io::serialization::shape_string(item.value().sizes().vec()));
    }
    item.value().copy_(saved);
  }
  return model;
}

}  // namespace megacpp::checkpoint
