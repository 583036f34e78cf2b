#include "checkpoint/checkpoint_model.h"

#include "checkpoint/model_args.h"
#include "models/registry.h"

namespace megacpp::checkpoint {

std::shared_ptr<const models::ModelConfig> checkpoint_model(const CheckpointReader& reader) {
  const nlohmann::json args = args_json(reader.object("args"));
  const auto type = args.find("model_type");
  const std::string model_type = type != args.end() && type->is_string() ? type->get<std::string>() : models::kDefaultModelType;
  return models::model_family(model_type).config_from_args(args, reader.dir());
}

}  // namespace megacpp::checkpoint
