#include "launch/load_section.h"

#include <stdexcept>

#include "models/model_flags.h"

namespace megacpp::launch {

void add_load_flags(cxxopts::Options& options, const std::string& group, const std::string& what) {
  options.add_options(group)
      ("load", "checkpoint root " + what + " (Megatron layout)", cxxopts::value<std::string>()->default_value(""))
      ("ckpt-step", "the iteration to load (default: the latest)", cxxopts::value<std::string>()->default_value(""));
}

std::optional<int64_t> checkpoint_step(const cxxopts::ParseResult& flags) {
  const std::string step = flags["ckpt-step"].as<std::string>();
  if (step.empty()) return std::nullopt;
  const auto n = models::parse_flag_number<int64_t>("ckpt-step", step);
  if (n < 0) throw std::invalid_argument("--ckpt-step " + step + ": expected an iteration number");
  return n;
}

checkpoint::CheckpointReader open_checkpoint(const cxxopts::ParseResult& flags) {
  const std::string load = flags["load"].as<std::string>();
  auto reader = checkpoint::CheckpointReader::open(load, checkpoint_step(flags), "--load");
  if (!reader) throw std::runtime_error("--load " + load + " has no checkpoint");
  return std::move(*reader);
}

}  // namespace megacpp::launch
