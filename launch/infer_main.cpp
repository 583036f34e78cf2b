// megacpp-infer: ROLL's fsdp2_infer as a program (Note [Forward-only sharded inference]): each
// next token's log-probability (and entropy) of the sequences of a JSON-lines file, under a model
// sharded with FSDP2 and filled from a checkpoint or a Hugging Face folder.
//   megacpp-run --nproc-per-node 2 megacpp-infer --input seqs.jsonl --output logprobs.jsonl
//       [--infer-batch-size 16] [--temperature 1] [--calculate-entropy] MEGACPP-TRAIN FLAGS
// The rest of the command line is megacpp-train's, read as it reads it, so that a training
// script's flags give the same model, tokenizer and layout (--use-torch-fsdp2,
// --fsdp2-config-path, --context-parallel-size, --load / --ckpt-step, --init-from-hf-path, ...).
// Its data flags may be left out: nothing is trained. Argument errors and failures exit 1.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "inference/fsdp2_infer.h"
#include "launch/own_flags.h"
#include "megacpp/logging.h"
#include "models/model_flags.h"
#include "settings/arguments.h"
#include "runtime/host_memory.h"
#include "megacpp/process_end.h"

namespace {

using namespace megacpp;

const std::vector<launch::OwnFlag>& own_flags() {
  static const std::vector<launch::OwnFlag> flags = {
      {"input", true, "JSON lines, one sequence each: [ids...] or {\"input_ids\": [ids...]} (required)"},
      {"output", true, "JSON lines written by rank 0 in input order: {\"log_probs\": [...]} with n - 1 numbers for n ids "
                       "(written whole at the end; required)"},
      {"infer-batch-size", true, "sequences per forward on each data-parallel rank (ROLL's infer_batch_size; default 16)"},
      {"temperature", true, "the logits are divided by it before the softmax, as verl does for the sampled policy (default 1)"},
      {"calculate-entropy", false, "also each position's entropy, \"entropy\": [...]"},
  };
  return flags;
}

inference::InferOptions infer_options(const std::map<std::string, std::string>& own) {
  inference::InferOptions options;
  for (const auto& [name, value] : own) {
    if (name == "input") options.input = value;
    if (name == "output") options.output = value;
    if (name == "infer-batch-size") options.batch_size = models::parse_flag_number<int64_t>(name, value);
    if (name == "temperature") options.temperature = models::parse_flag_number<double>(name, value);
    if (name == "calculate-entropy") options.entropy = true;
  }
  return options;
}

int run(int argc, char** argv) {
  const char* program = "megacpp-infer";
  try {
    launch::SplitCommandLine split = launch::split_command_line(argc, argv, own_flags());
    if (split.help) {
      launch::print_own_flags("megacpp-infer: per-token log-probabilities of given sequences under a model sharded with FSDP2 "
                              "(ROLL's fsdp2_infer)",
                              own_flags(),
                              "and megacpp-train's flags for the model, tokenizer, parallelism and weights (megacpp-train --help): "
                              "--load or --init-from-hf-path is required; data flags may be left out.");
      return 0;
    }
    const inference::InferOptions options = infer_options(split.own);
    const settings::TrainingArguments args = settings::parse_arguments(static_cast<int>(split.rest.size()), split.rest.data());
    runtime::keep_freed_host_memory();  // Note [Host memory]
    std::signal(SIGPIPE, SIG_IGN);       // a peer's closed socket is an error to report, as in megacpp-train
    return inference::run_fsdp2_infer(args, options, program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { megacpp::end_process(run(argc, argv)); }
