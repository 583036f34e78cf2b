// megacpp-train: Megatron-style training of a transformer language model with FSDP2.
#include "megacpp/training/train_main.h"

int main(int argc, char** argv) { return megacpp::training::train_main(argc, argv); }
