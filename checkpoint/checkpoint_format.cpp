#include "checkpoint/checkpoint_format.h"

#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "checkpoint/dcp_io.h"
#include "io/serialization/atomic_file.h"
#include "io/serialization/torch_save.h"

namespace megacpp::checkpoint {
namespace fs = std::filesystem;
using io::serialization::PyValue;

CheckpointFormat CheckpointFormat::named(const std::string& name) {
  if (name == "torch_dcp") return torch_dcp();
  if (name == "torch_dist") return torch_dist();
  throw std::invalid_argument("--ckpt-format must be torch_dist or torch_dcp (got '" + name +
                              "'); like MindSpeed, megacpp's FSDP2 saves only these two formats");
}

CheckpointFormat CheckpointFormat::of_directory(const std::string& dir) {
  const fs::path json = fs::path(dir) / "metadata.json";
  if (fs::exists(json)) {
    nlohmann::json meta;
    try {
      meta = nlohmann::json::parse(io::checkpoint::read_whole_file(json.string()));
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(json.string() + ": not valid JSON (" + e.what() + ")");
    }
    const std::string backend = meta.value("sharded_backend", "");
    if (backend != "torch_dist") {
      throw std::runtime_error(json.string() + ": sharded_backend is '" + backend + "'; megacpp reads torch_dist only");
    }
    return torch_dist();
  }
  if (fs::exists(fs::path(dir) / ".metadata")) return torch_dcp();
  if (!fs::is_directory(dir)) throw std::runtime_error("checkpoint directory " + dir + " does not exist");
  throw std::runtime_error(dir + " is not a checkpoint: it has neither .metadata (torch_dcp) nor metadata.json (torch_dist)");
}

std::string CheckpointFormat::name() const { return kind_ == Kind::kTorchDcp ? "torch_dcp" : "torch_dist"; }

io::checkpoint::StatePath CheckpointFormat::model(const std::string& fqn) const {
  if (kind_ == Kind::kTorchDcp) return {"model", fqn};
  return {fqn};
}

io::checkpoint::StatePath CheckpointFormat::optimizer_state(const std::string& fqn, const std::string& name) const {
  if (kind_ == Kind::kTorchDcp) return {"optim", "state." + fqn + "." + name};
  return {"optimizer.state." + name + "." + fqn};
}

io::checkpoint::StatePath CheckpointFormat::param_group(const std::string& fqn, const std::string& hyperparameter) const {
  if (kind_ != Kind::kTorchDcp) throw std::logic_error("torch_dist keeps no per-parameter param groups");
  return {"optim", "param_groups." + fqn + "." + hyperparameter};
}

void CheckpointFormat::add_unsharded(RankItems& items, UnshardedState& unsharded, const std::string& key,
                                     PyValue value) const {
  if (kind_ == Kind::kTorchDist) {
    unsharded.emplace_back(key, std::move(value));
  } else {
    items.add_flattened({key}, value);
  }
}

void CheckpointFormat::write_index_files(const UnshardedState& unsharded, const std::string& dir) const {
  if (kind_ != Kind::kTorchDist) return;
  std::vector<std::pair<PyValue, PyValue>> common;
  for (const auto& [key, value] : unsharded) common.emplace_back(PyValue::string(key), value);
  io::serialization::write_file_atomically((fs::path(dir) / "common.pt").string(),
                                       io::serialization::torch_save(PyValue::dict(std::move(common))));
  const nlohmann::json metadata = {{"sharded_backend", "torch_dist"},
                                   {"sharded_backend_version", 1},
                                   {"common_backend", "torch"},
                                   {"common_backend_version", 1}};
  io::serialization::write_file_atomically((fs::path(dir) / "metadata.json").string(), metadata.dump());
}

std::optional<PyValue> CheckpointFormat::read_common(const std::string& dir) const {
  if (kind_ != Kind::kTorchDist) return std::nullopt;
  const std::string path = (fs::path(dir) / "common.pt").string();
  PyValue common = io::serialization::torch_load(io::checkpoint::read_whole_file(path), path);
  if (common.kind() != PyValue::Kind::kDict) throw std::runtime_error(path + ": expected a dict, found " + common.repr());
  return common;
}

}  // namespace megacpp::checkpoint
