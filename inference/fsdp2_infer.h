// megacpp-infer: ROLL's fsdp2_infer strategy as a program (Note [Forward-only sharded
// inference]). The model of megacpp-train's flags, sharded as they say (FSDP2, HSDP, Ulysses),
// filled from --load or --init-from-hf-path, scores the token ids of a JSON-lines file; rank 0
// writes each line's next-token log-probabilities (and entropies) as JSON lines in input order.
#pragma once

#include <cstdint>
#include <string>

#include "settings/arguments.h"

namespace megacpp::inference {

struct InferOptions {
  std::string input;        // JSON lines: [ids...] or {"input_ids": [ids...]}
  std::string output;       // JSON lines {"log_probs": [...], "entropy": [...]}, one per input line
  int64_t batch_size = 16;  // --infer-batch-size (ROLL's infer_batch_size): sequences per forward per rank
  double temperature = 1.0;
  bool entropy = false;     // --calculate-entropy
};

// Runs on the launch environment's ranks (megacpp-run, torchrun). Returns the exit code; an error
// is printed as "PROGRAM: error: ..." first. The output is written whole or not at all (a
// temporary file renamed at the end), so a failure leaves an earlier output in place.
int run_fsdp2_infer(const settings::TrainingArguments& args, const InferOptions& options, const char* program = "megacpp-infer");

}  // namespace megacpp::inference
