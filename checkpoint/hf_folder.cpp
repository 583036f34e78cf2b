#include "checkpoint/hf_folder.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

#include <ATen/ATen.h>

#include "checkpoint/tensor_convert.h"
#include "models/registry.h"

namespace megacpp::checkpoint {
namespace fs = std::filesystem;

std::string hf_config_path(const std::string& dir) { return (fs::path(dir) / "config.json").string(); }

bool is_hf_folder(const std::string& dir) {
  std::error_code error;
  const fs::path root(dir);
  return fs::is_regular_file(root / "config.json", error) &&
         (fs::is_regular_file(root / io::serialization::kSafetensorsSingleName, error) ||
          fs::is_regular_file(root / io::serialization::kSafetensorsIndexName, error));
}

nlohmann::json read_hf_config(const std::string& dir) {
  const std::string path = hf_config_path(dir);
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot open (a Hugging Face model folder has a config.json)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path + ": not valid JSON: " + e.what());
  }
}

const models::ModelFamily& family_of_hf_config(const nlohmann::json& config, const std::string& path,
                                               const std::string& chosen) {
  if (!config.is_object()) throw std::invalid_argument(path + ": expected a JSON object");
  const auto type = config.find("model_type");
  if (type == config.end() || !type->is_string()) {
    throw std::invalid_argument(path + ": key 'model_type': " + (type == config.end() ? std::string("missing") : type->dump()) +
                                ": expected the name of a Hugging Face model type");
  }
  return models::family_for_hf_model_type(type->get<std::string>(), path, chosen);
}

HfFolderWeights::HfFolderWeights(const std::string& dir, const models::ModelFamily& family, const models::ModelConfig& config)
    : dir_(dir), family_(family), config_(config), files_(io::serialization::SafetensorsCheckpoint::open(dir)) {
  // A family may read several layouts (LLaVA's before and after transformers 4.52), so the
  // folder's own name of each parameter is looked up first.
  for (const auto& name : files_.names()) {
    if (const auto fqn = family.from_hf_tensor(config, name)) folder_names_.emplace(*fqn, name);
  }
}

HfFolderWeights::Source HfFolderWeights::source(const std::string& fqn) const {
  models::HfTensorName hf = family_.to_hf_tensor(config_, fqn);
  if (const auto own = folder_names_.find(fqn); own != folder_names_.end()) hf.name = own->second;
  if (!files_.contains(hf.name)) {
    throw std::runtime_error(dir_ + ": no tensor '" + hf.name + "' (the model of " + hf_config_path(dir_) + " needs it)");
  }
  return {hf, (fs::path(dir_) / files_.filename_of(hf.name)).string() + ", tensor '" + hf.name + "'"};
}

HfFolderWeights::Stored HfFolderWeights::checked(const std::string& fqn, const std::vector<int64_t>& shape) const {
  const Source s = source(fqn);
  const io::serialization::TensorView view = files_.tensor(s.hf.name);
  std::vector<int64_t> stored = shape;
  if (s.hf.transposed && stored.size() == 2) std::swap(stored[0], stored[1]);
  if (view.shape != stored) {
    throw std::runtime_error(s.what + ": shape " + io::serialization::shape_string(view.shape) + ", the model of " +
                             hf_config_path(dir_) + " needs " + io::serialization::shape_string(stored));
  }
  return {s, view, from_safetensors_dtype(view.dtype, s.what)};  // throws for a dtype megacpp does not read
}

void HfFolderWeights::check(const std::string& fqn, const std::vector<int64_t>& shape) const { checked(fqn, shape); }

at::Tensor HfFolderWeights::block(const std::string& fqn, const std::vector<int64_t>& shape, const std::vector<int64_t>& offsets,
                                  const std::vector<int64_t>& sizes) const {
  const Stored s = checked(fqn, shape);
  // A view of the mapped file (read only); the copy below reads just the block's rows.
  at::Tensor stored = at::from_blob(const_cast<uint8_t*>(s.view.data), s.view.shape, at::TensorOptions().dtype(s.dtype));
  at::Tensor t = s.source.hf.transposed ? stored.t() : stored;
  for (size_t dim = 0; dim < sizes.size(); ++dim) t = t.narrow(static_cast<int64_t>(dim), offsets.at(dim), sizes[dim]);
  at::Tensor values = t.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
  // safetensors has no checksum: a damaged byte that stays a finite number goes unseen, but a
  // NaN or infinity is refused before it reaches training.
  const int64_t nonfinite = values.numel() - values.isfinite().sum().item<int64_t>();
  if (nonfinite > 0) {
    throw std::runtime_error(s.source.what + ": " + std::to_string(nonfinite) + " of its values are NaN or infinite (a damaged "
                             "file, or a model saved after it diverged); megacpp starts only from finite weights");
  }
  if (s.source.hf.offset != 0.0) values.sub_(s.source.hf.offset);
  return values;
}

at::Tensor HfFolderWeights::full(const std::string& fqn, const std::vector<int64_t>& shape) const {
  return block(fqn, shape, std::vector<int64_t>(shape.size(), 0), shape);
}

}  // namespace megacpp::checkpoint
