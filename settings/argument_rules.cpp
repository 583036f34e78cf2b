#include "settings/argument_rules.h"

#include "megacpp/checked_math.h"

namespace megacpp::settings {

void validate_arguments(const TrainingArguments& a) {
  // Each micro-batch is seq + 1 token ids of 8 bytes per sample (the model's and the training
  // section's flags together).
  checked_product({{a.micro_batch_size, "--micro-batch-size"},
                   {checked_sum({{a.seq_length, "--seq-length"}, {1, "1"}}, "the sample length"), "(--seq-length + 1)"},
                   {8, "8 bytes"}},
                  "the bytes of a micro-batch");
}

}  // namespace megacpp::settings
