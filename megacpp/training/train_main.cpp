#include "megacpp/training/train_main.h"

#include <csignal>
#include <cstdio>
#include <exception>

#include "megacpp/arguments.h"
#include "megacpp/logging.h"
#include "megacpp/training/host_memory.h"
#include "megacpp/training/trainer.h"

namespace megacpp::training {

int train_main(int argc, const char* const* argv, const char* program) {
  try {
    bool help = false;
    const TrainingArguments args = parse_arguments(argc, argv, &help);
    if (help) return 0;
    keep_freed_host_memory();  // Note [Host memory]
    // As Python (so torchrun's ranks) does: a write to a socket a failed peer closed is an error
    // to report, not a silent death by SIGPIPE that would hide the peer's own message.
    std::signal(SIGPIPE, SIG_IGN);
    return run_training(args, program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    return 1;
  }
}

}  // namespace megacpp::training
