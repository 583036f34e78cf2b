// megacpp-grpo: GRPO on prompts with exact answers (rl/grpo_run.h), ROLL's RLVR pipeline as a
// program.
//   megacpp-run --nproc-per-node 3 megacpp-grpo --prompts train.jsonl --eval-prompts held_out.jsonl \
//       --rollout-ranks 1 --rollout-batch-size 8 --num-return-sequences-in-group 4 MEGACPP-TRAIN FLAGS
// The rest of the command line is megacpp-train's (model, tokenizer, --use-torch-fsdp2,
// --fsdp2-config-path, --load [--finetune] or --init-from-hf-path, --lr, --train-iters as the
// number of steps, --save, --save-interval, --seed, --clip-grad). Its data flags may be left
// out: the prompts are the data; those of its flags that mean nothing to a GRPO run (the data,
// the batch sizes, loss scaling, profiling) are refused naming what it reads instead. The learning
// rate is constant unless --lr-decay-style is given (Megatron's schedule over the optimizer
// steps). Argument errors and failures exit 1.
#include <csignal>
#include <cstdio>
#include <exception>
#include <utility>

#include "launch/grpo_command_line.h"
#include "launch/grpo_section.h"
#include "launch/own_flags.h"
#include "megacpp/logging.h"
#include "rl/grpo_run.h"
#include "runtime/host_memory.h"
#include "megacpp/process_end.h"

namespace {

using namespace megacpp;

int run(int argc, char** argv) {
  const char* program = "megacpp-grpo";
  try {
    launch::SplitCommandLine split = launch::split_command_line(argc, argv, launch::grpo_flags());
    if (split.help) {
      launch::print_own_flags("megacpp-grpo: GRPO on prompts with exact answers, the rollout colocated or on ranks of its own",
                              launch::grpo_flags(),
                              "and megacpp-train's flags for the model, tokenizer, parallelism, weights (--load [--finetune] or "
                              "--init-from-hf-path), --lr, --train-iters (the steps), --save/--save-interval, --seed and --clip-grad "
                              "(megacpp-train --help); data flags may be left out, and those that mean nothing here are refused.");
      return 0;
    }
    launch::GrpoCommandLine line = launch::read_grpo_command_line(std::move(split), program);
    runtime::keep_freed_host_memory();  // Note [Host memory]
    std::signal(SIGPIPE, SIG_IGN);       // a peer's closed socket is an error to report, as in megacpp-train
    return rl::run_grpo(std::move(line.args), line.options, program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { megacpp::end_process(run(argc, argv)); }
