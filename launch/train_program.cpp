#include "launch/train_program.h"

#include <csignal>
#include <cstdio>
#include <exception>

#include "settings/arguments.h"
#include "megacpp/logging.h"
#include "runtime/host_memory.h"
#include "runtime/model_setup.h"
#include "training/trainer.h"

namespace megacpp::launch {

int train_program(int argc, const char* const* argv, const char* program) {
  try {
    bool help = false;
    const settings::TrainingArguments args = settings::parse_arguments(argc, argv, &help);
    if (help) return 0;
    runtime::keep_freed_host_memory();  // Note [Host memory]
    // As Python (so torchrun's ranks) does: a write to a socket a failed peer closed is an error
    // to report, not a silent death by SIGPIPE that would hide the peer's own message.
    std::signal(SIGPIPE, SIG_IGN);
    return training::run_training(runtime::resolve_job(args, settings::JobLayout::training()), program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    return 1;
  }
}

}  // namespace megacpp::launch
