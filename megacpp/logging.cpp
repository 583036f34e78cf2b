#include "megacpp/logging.h"

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

}  // namespace megacpp
