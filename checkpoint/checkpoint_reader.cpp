#include "checkpoint/checkpoint_reader.h"

#include <filesystem>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "io/checkpoint/index_checksums.h"

namespace megacpp::checkpoint {
namespace fs = std::filesystem;

std::optional<CheckpointReader> CheckpointReader::open(const std::string& root, std::optional<int64_t> step, const std::string& flag) {
  std::optional<int64_t> iteration = step ? step : io::checkpoint::read_tracker(root);
  if (!iteration) return std::nullopt;
  std::string dir = io::checkpoint::checkpoint_dir(root, *iteration);
  if (!fs::is_directory(dir) && fs::is_directory(io::checkpoint::previous_copy_dir(dir))) {
    spdlog::warn("{}: {} is missing but {} is there: a second save of iteration {} was interrupted; loading the "
                 "earlier copy", flag, dir, io::checkpoint::previous_copy_dir(dir), *iteration);
    dir = io::checkpoint::previous_copy_dir(dir);
  }
  if (!fs::is_directory(dir)) {
    throw std::runtime_error(flag + ": checkpoint directory " + dir + " does not exist" +
                             (step ? std::string(" (--ckpt-step ") + std::to_string(*step) + ")" : " (named by " + io::checkpoint::tracker_path(root) + ")"));
  }
  io::checkpoint::verify_index_checksums(dir, *iteration);
  return CheckpointReader(dir, *iteration);
}

CheckpointReader::CheckpointReader(const std::string& dir, int64_t iteration)
    : format_(CheckpointFormat::of_directory(dir)), iteration_(iteration), dcp_(dir), common_(format_.read_common(dir)) {}

bool CheckpointReader::has_object(const std::string& key) const {
  if (common_) return common_->find(key) != nullptr;
  return dcp_.has(key) && !dcp_.metadata().entry(key).is_tensor;
}

io::serialization::PyValue CheckpointReader::object(const std::string& key) const {
  if (common_) {
    if (const io::serialization::PyValue* v = common_->find(key)) return *v;
    throw std::runtime_error((fs::path(dir()) / "common.pt").string() + ": no key '" + key + "'");
  }
  return dcp_.read_object(key);
}

}  // namespace megacpp::checkpoint
