#include "megacpp/training/train_main.h"

#include <cstdio>
#include <exception>

#include "megacpp/arguments.h"
#include "megacpp/training/host_memory.h"
#include "megacpp/training/trainer.h"

namespace megacpp::training {

int train_main(int argc, const char* const* argv, const char* program) {
  try {
    bool help = false;
    const TrainingArguments args = parse_arguments(argc, argv, &help);
    if (help) return 0;
    keep_freed_host_memory();  // Note [Host memory]
    return run_training(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace megacpp::training
