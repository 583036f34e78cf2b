// gpt2-train: megacpp-train with the GPT-2 family linked in (select it with --model-type gpt2).
#include <launch/train_program.h>

int main(int argc, char** argv) { return megacpp::launch::train_program(argc, argv, "gpt2-train"); }
