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
#include <string>
#include <vector>

#include "inference/fsdp2_infer.h"
#include "megacpp/logging.h"
#include "models/model_flags.h"
#include "settings/arguments.h"
#include "training/host_memory.h"

namespace {

using namespace megacpp;

struct OwnFlag {
  const char* name;
  bool takes_value;
  const char* help;
};

const std::vector<OwnFlag>& own_flags() {
  static const std::vector<OwnFlag> flags = {
      {"input", true, "JSON lines, one sequence each: [ids...] or {\"input_ids\": [ids...]} (required)"},
      {"output", true, "JSON lines written by rank 0 in input order: {\"log_probs\": [...]} with n - 1 numbers for n ids "
                       "(written whole at the end; required)"},
      {"infer-batch-size", true, "sequences per forward on each data-parallel rank (ROLL's infer_batch_size; default 16)"},
      {"temperature", true, "the logits are divided by it before the softmax, as verl does for the sampled policy (default 1)"},
      {"calculate-entropy", false, "also each position's entropy, \"entropy\": [...]"},
  };
  return flags;
}

void print_help() {
  std::printf("megacpp-infer: per-token log-probabilities of given sequences under a model sharded with FSDP2 (ROLL's "
              "fsdp2_infer)\n\n");
  for (const auto& f : own_flags()) std::printf("  --%-22s %s\n", (std::string(f.name) + (f.takes_value ? " V" : "")).c_str(), f.help);
  std::printf("\nand megacpp-train's flags for the model, tokenizer, parallelism and weights (megacpp-train --help): --load or "
              "--init-from-hf-path is required; data flags may be left out.\n");
}

// Takes megacpp-infer's own flags out of argv (--flag V or --flag=V); the rest stays for
// megacpp-train's parser.
inference::InferOptions take_own_flags(int argc, char** argv, std::vector<const char*>& rest, bool& help) {
  inference::InferOptions options;
  rest.push_back(argv[0]);
  bool has_data = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") help = true;
    if (arg == "--mock-data" || arg.rfind("--data-path", 0) == 0 || arg.rfind("--mock-data=", 0) == 0) has_data = true;
    const size_t equals = arg.find('=');
    const std::string name = arg.rfind("--", 0) == 0 ? arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2) : "";
    const OwnFlag* own = nullptr;
    for (const auto& f : own_flags()) own = name == f.name ? &f : own;
    if (!own) {
      rest.push_back(argv[i]);
      continue;
    }
    std::string value = "true";
    if (own->takes_value) {
      if (equals != std::string::npos) {
        value = arg.substr(equals + 1);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        throw std::invalid_argument("--" + name + " needs a value");
      }
    }
    if (name == "input") options.input = value;
    if (name == "output") options.output = value;
    if (name == "infer-batch-size") options.batch_size = models::parse_flag_number<int64_t>(name, value);
    if (name == "temperature") options.temperature = models::parse_flag_number<double>(name, value);
    if (name == "calculate-entropy") options.entropy = true;
  }
  static const char* const kNoData = "--mock-data";  // the data section needs a source; none is read
  if (!has_data) rest.push_back(kNoData);
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const char* program = "megacpp-infer";
  try {
    std::vector<const char*> rest;
    bool help = false;
    const inference::InferOptions options = take_own_flags(argc, argv, rest, help);
    if (help) {
      print_help();
      return 0;
    }
    const settings::TrainingArguments args = settings::parse_arguments(static_cast<int>(rest.size()), rest.data());
    training::keep_freed_host_memory();  // Note [Host memory]
    std::signal(SIGPIPE, SIG_IGN);       // a peer's closed socket is an error to report, as in megacpp-train
    return inference::run_fsdp2_infer(args, options, program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    return 1;
  }
}
