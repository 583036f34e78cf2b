// gpt2-train: megacpp-train with the GPT-2 family linked in (select it with --model-type gpt2).
#include <megacpp/training/train_main.h>

int main(int argc, char** argv) { return megacpp::training::train_main(argc, argv, "gpt2-train"); }
