#include "launch/inference_tool.h"

#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>

#include "megacpp/logging.h"
#include "models/model_flags.h"
#include "models/registry.h"
#include "settings/model_arguments.h"

namespace megacpp::launch {

int run_inference_tool(const char* program, cxxopts::Options options, int argc, char** argv,
                       const std::function<int(const cxxopts::ParseResult&)>& body) {
  cxxopts::ParseResult parsed;
  try {
    for (const auto& library : settings::model_libraries_in(argc, argv)) models::load_model_library(library);
    parsed = options.parse(argc, argv);
    if (parsed.count("help")) {
      std::cout << options.help() << std::endl;
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << std::endl;
    return 2;
  }
  try {
    return body(parsed);
  } catch (const std::invalid_argument& e) {
    std::cerr << program << ": error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << error_message(e) << std::endl;
    return 1;
  }
}

checkpoint::CheckpointReader open_checkpoint(const cxxopts::ParseResult& flags) {
  const std::string load = flags["load"].as<std::string>(), step = flags["ckpt-step"].as<std::string>();
  auto reader = checkpoint::CheckpointReader::open(
      load, step.empty() ? std::nullopt : std::optional<int64_t>(models::parse_flag_number<int64_t>("ckpt-step", step)), "--load");
  if (!reader) throw std::runtime_error("--load " + load + " has no checkpoint");
  return std::move(*reader);
}

}  // namespace megacpp::launch
