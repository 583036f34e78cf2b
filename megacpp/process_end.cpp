#include "megacpp/process_end.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <spdlog/spdlog.h>

namespace megacpp {

void end_process(int exit_code) {
  spdlog::shutdown();  // flushes and drops every logger
  std::cout.flush();
  std::cerr.flush();
  std::clog.flush();
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

}  // namespace megacpp
