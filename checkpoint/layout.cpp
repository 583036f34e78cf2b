#include "checkpoint/layout.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace megacpp::checkpoint {
namespace fs = std::filesystem;

std::string format_name(CheckpointFormat format) {
  return format == CheckpointFormat::kTorchDcp ? "torch_dcp" : "torch_dist";
}

CheckpointFormat parse_format(const std::string& name) {
  if (name == "torch_dcp") return CheckpointFormat::kTorchDcp;
  if (name == "torch_dist") return CheckpointFormat::kTorchDist;
  throw std::invalid_argument("--ckpt-format must be torch_dcp or torch_dist with --use-torch-fsdp2 (got '" + name + "')");
}

std::string flat_key(const StatePath& path) {
  std::string key;
  for (const auto& part : path) key += (key.empty() ? "" : ".") + part;
  return key;
}

StatePath model_path(CheckpointFormat format, const std::string& fqn) {
  if (format == CheckpointFormat::kTorchDcp) return {"model", fqn};
  return {fqn};
}

std::string tracker_path(const std::string& root) { return (fs::path(root) / "latest_checkpointed_iteration.txt").string(); }

std::string checkpoint_dir(const std::string& root, int64_t iteration) {
  if (iteration == kReleaseIteration) return (fs::path(root) / "release").string();
  char name[32];
  std::snprintf(name, sizeof(name), "iter_%07lld", static_cast<long long>(iteration));
  return (fs::path(root) / name).string();
}

std::optional<int64_t> read_tracker(const std::string& root) {
  const std::string path = tracker_path(root);
  if (!fs::exists(path)) return std::nullopt;
  std::string text = read_whole_file(path);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (text == "release") return kReleaseIteration;
  try {
    size_t used = 0;
    const long long iteration = std::stoll(text, &used);
    if (used == text.size() && iteration >= 0) return iteration;
  } catch (const std::exception&) {
  }
  throw std::runtime_error(path + ": expected an iteration number or 'release', found '" + text + "'");
}

void write_tracker(const std::string& root, int64_t iteration) {
  write_file_atomically(tracker_path(root), iteration == kReleaseIteration ? "release" : std::to_string(iteration));
}

CheckpointFormat detect_format(const std::string& dir) {
  const fs::path json = fs::path(dir) / "metadata.json";
  if (fs::exists(json)) {
    nlohmann::json meta;
    try {
      meta = nlohmann::json::parse(read_whole_file(json.string()));
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(json.string() + ": not valid JSON (" + e.what() + ")");
    }
    const std::string backend = meta.value("sharded_backend", "");
    if (backend != "torch_dist") {
      throw std::runtime_error(json.string() + ": sharded_backend is '" + backend + "'; megacpp reads torch_dist only");
    }
    return CheckpointFormat::kTorchDist;
  }
  if (fs::exists(fs::path(dir) / ".metadata")) return CheckpointFormat::kTorchDcp;
  if (!fs::is_directory(dir)) throw std::runtime_error("checkpoint directory " + dir + " does not exist");
  throw std::runtime_error(dir + " is not a checkpoint: it has neither .metadata (torch_dcp) nor metadata.json (torch_dist)");
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace megacpp::checkpoint
