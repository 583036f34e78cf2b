#include "runtime/checkpoint_compatibility.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "settings/model_arguments.h"

namespace megacpp::runtime {

void check_checkpoint_model(const nlohmann::json& saved, const models::ModelConfig& model, const std::string& where) {
  nlohmann::json mine = model.to_args();
  mine["model_type"] = model.model_type();
  std::vector<std::string> differences;
  for (const auto& [field, value] : mine.items()) {
    if (!model.checkpoint_must_match(field)) continue;
    auto it = saved.find(field);
    if (it == saved.end() || it->is_null() || *it == value) continue;  // json compares 2 and 2.0 as equal
    differences.push_back(settings::flag_of_arg(field) + " is " + it->dump() + " there and " + value.dump() + " here");
  }
  if (differences.empty()) return;
  std::string message = where + " holds another model than the flags build: ";
  for (size_t i = 0; i < differences.size(); ++i) message += (i ? "; " : "") + differences[i];
  throw std::runtime_error(message + " (give the flags it was saved with)");
}

std::vector<std::string> unexpected_tensors(const checkpoint::DcpReader& reader, const std::vector<std::string>& expected) {
  const std::set<std::string> known(expected.begin(), expected.end());
  std::vector<std::string> unexpected;
  for (const auto& key : reader.metadata().keys()) {
    if (reader.metadata().entry(key).is_tensor && !known.count(key)) unexpected.push_back(key);
  }
  std::sort(unexpected.begin(), unexpected.end());
  return unexpected;
}

}  // namespace megacpp::runtime
