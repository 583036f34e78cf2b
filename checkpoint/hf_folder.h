// A Hugging Face model folder (config.json + model.safetensors or shards with an index) read as
// a megacpp model: the family and config its config.json describes, and each parameter's values
// by megacpp name. megacpp-convert import and megacpp-train --init-from-hf-path read through it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "io/serialization/safetensors.h"
#include "models/model_family.h"

namespace megacpp::checkpoint {

// config.json of `dir`, parsed; throws std::invalid_argument naming the file when it cannot be
// read or is not JSON.
nlohmann::json read_hf_config(const std::string& dir);
std::string hf_config_path(const std::string& dir);
// Whether `dir` is a Hugging Face model folder: config.json beside model.safetensors or
// model.safetensors.index.json.
bool is_hf_folder(const std::string& dir);

// The family that reads a config.json (`path` names it in errors), from its model_type;
// `chosen` (a --model-type) decides when several families read it.
const models::ModelFamily& family_of_hf_config(const nlohmann::json& config, const std::string& path,
                                               const std::string& chosen = "");

// The weights of a folder as a model of `config` names them. The safetensors files are mapped:
// reading one block of a tensor touches only that block's pages, so a rank that reads its
// shard of every parameter never holds the whole model.
class HfFolderWeights {
 public:
  // Every tensor of the folder must be one `family` knows (it throws for others).
  HfFolderWeights(const std::string& dir, const models::ModelFamily& family, const models::ModelConfig& config);

  // Throws std::runtime_error naming the file and the tensor when parameter `fqn` (of `shape`
  // in the model) is missing or of another shape, or stored in a dtype megacpp cannot read.
  void check(const std::string& fqn, const std::vector<int64_t>& shape) const;
  // The block of parameter `fqn` (global `shape`) at `offsets` of `sizes`, as fp32 values in the
  // model's layout (transposed back, a stored offset taken off); checked as check() does, and
  // refused naming the file and the tensor when a value is NaN or infinite.
  at::Tensor block(const std::string& fqn, const std::vector<int64_t>& shape, const std::vector<int64_t>& offsets,
                   const std::vector<int64_t>& sizes) const;
  at::Tensor full(const std::string& fqn, const std::vector<int64_t>& shape) const;

 private:
  struct Source {
    models::HfTensorName hf;  // the folder's name of the parameter
    std::string what;         // "DIR/FILE, tensor 'NAME'" for errors
  };
  Source source(const std::string& fqn) const;
  // The stored tensor of parameter `fqn`, its shape and dtype checked (what check() throws).
  struct Stored {
    Source source;
    io::serialization::TensorView view;
    at::ScalarType dtype;
  };
  Stored checked(const std::string& fqn, const std::vector<int64_t>& shape) const;

  std::string dir_;
  const models::ModelFamily& family_;
  const models::ModelConfig& config_;
  io::serialization::SafetensorsCheckpoint files_;
  std::map<std::string, std::string> folder_names_;  // parameter -> the folder's own name for it
};

}  // namespace megacpp::checkpoint
