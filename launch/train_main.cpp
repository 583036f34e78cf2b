// megacpp-train: Megatron-style training of a transformer language model with FSDP2.
#include "launch/train_program.h"
#include "megacpp/process_end.h"

int main(int argc, char** argv) { megacpp::end_process(megacpp::launch::train_program(argc, argv)); }
