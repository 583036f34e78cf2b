// megacpp-train: Megatron-style training of a transformer language model with FSDP2.
#include "launch/train_program.h"

int main(int argc, char** argv) { return megacpp::launch::train_program(argc, argv); }
