#include "io/checkpoint/layout.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace megacpp::io::checkpoint {
namespace fs = std::filesystem;

std::string flat_key(const StatePath& path) {
  std::string key;
  for (const auto& part : path) key += (key.empty() ? "" : ".") + part;
  return key;
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
  if (!fs::is_regular_file(path)) {
    throw std::runtime_error(path + ": is not a file: the checkpoint tracker holds the latest iteration ('release' or a "
                             "number, as --save writes it); remove it or give another directory");
  }
  std::string text = read_whole_file(path);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (text == "release") return kReleaseIteration;
  try {
    size_t used = 0;
    const long long iteration = std::stoll(text, &used);
    if (used == text.size() && iteration >= 0) return iteration;
  } catch (const std::exception&) {
  }
  if (text.empty()) {
    throw std::runtime_error(path + ": is empty: expected an iteration number or 'release' (what --save writes there)");
  }
  throw std::runtime_error(path + ": expected an iteration number or 'release', found '" + text + "'");
}

void write_tracker(const std::string& root, int64_t iteration) {
  serialization::write_file_atomically(tracker_path(root), iteration == kReleaseIteration ? "release" : std::to_string(iteration));
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace megacpp::io::checkpoint
