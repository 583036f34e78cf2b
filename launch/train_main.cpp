// megacpp-train: Megatron-style training of a transformer language model with FSDP2.
#include <cstdio>
#include <exception>

#include "megacpp/arguments.h"
#include "megacpp/training/trainer.h"

int main(int argc, char** argv) {
  try {
    bool help = false;
    const megacpp::TrainingArguments args = megacpp::parse_arguments(argc, argv, &help);
    if (help) return 0;
    return megacpp::training::run_training(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megacpp-train: error: %s\n", e.what());
    return 1;
  }
}
