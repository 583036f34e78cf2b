#include "launch/tool_run.h"

#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>

#include "megacpp/logging.h"
#include "models/registry.h"
#include "settings/model_arguments.h"

namespace megacpp::launch {

int run_tool(const char* program, cxxopts::Options options, int argc, char** argv,
             const std::function<int(const cxxopts::ParseResult&)>& body) {
  settings::add_model_library_flag(options, "");
  options.add_options()("h,help", "print this help");
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

}  // namespace megacpp::launch
