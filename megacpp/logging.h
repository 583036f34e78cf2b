// Logging set-up: rank 0 logs at info level, other ranks only warnings and errors.
#pragma once

namespace megacpp {

void setup_logging(int rank);

}  // namespace megacpp
