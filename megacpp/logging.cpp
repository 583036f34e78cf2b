#include "megacpp/logging.h"

#include <cstdlib>

#include <c10/util/Exception.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace megacpp {

void setup_logging(int rank) {
  auto logger = spdlog::stdout_logger_mt("megacpp");
  logger->set_pattern("%v");
  logger->set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

std::string error_message(const std::exception& error) {
  const auto* from_libtorch = dynamic_cast<const c10::Error*>(&error);
  const char* show = std::getenv("TORCH_SHOW_CPP_STACKTRACES");
  if (!from_libtorch || (show && std::string(show) == "1")) return error.what();
  return from_libtorch->what_without_backtrace();
}

}  // namespace megacpp
