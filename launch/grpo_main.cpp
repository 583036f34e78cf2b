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
#include <deque>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "launch/grpo_section.h"
#include "launch/own_flags.h"
#include "megacpp/logging.h"
#include "rl/grpo_run.h"
#include "settings/rlvr_config.h"
#include "settings/arguments.h"
#include "runtime/host_memory.h"
#include "megacpp/process_end.h"

namespace {

using namespace megacpp;

bool is_own(const std::string& name) {
  for (const auto& f : launch::grpo_flags()) {
    if (name == f.name) return true;
  }
  return false;
}

bool given(const std::vector<const char*>& rest, const std::string& name) {
  for (const char* arg : rest) {
    const std::string a = arg;
    if (a == "--" + name || a.rfind("--" + name + "=", 0) == 0) return true;
  }
  return false;
}

// --rl-config-path's keys as flags: own ones into `split.own`, megacpp-train's appended to the rest
// (their text kept in `storage`). A flag given on both sides is refused naming both.
void add_rlvr_config(launch::SplitCommandLine& split, rl::GrpoOptions& options, std::deque<std::string>& storage) {
  const std::string path = split.own.at("rl-config-path");
  const settings::RlvrConfig config = settings::read_rlvr_config(path);
  auto add = [&](const std::string& name, const std::string& value) {
    if (is_own(name)) {
      split.own[name] = value.empty() ? "true" : value;  // "" for a switch
      return;
    }
    split.rest.push_back(storage.emplace_back("--" + name).c_str());
    if (!value.empty()) split.rest.push_back(storage.emplace_back(value).c_str());
  };
  auto on_command_line = [&](const std::string& name) { return is_own(name) ? split.own.count(name) > 0 : given(split.rest, name); };
  for (const auto& [name, value] : config.flags) {
    if (on_command_line(name)) throw std::invalid_argument("--" + name + " is given on the command line and by " + path + "; keep one");
    add(name, value);
  }
  for (const auto& [name, value] : config.defaults) {
    if (!on_command_line(name)) add(name, value);
  }
  if (!config.train_strategy_yaml.empty() && given(split.rest, "fsdp2-config-path")) {
    throw std::invalid_argument("--fsdp2-config-path and actor_train.strategy_args in " + path + " both give the FSDP2 config; keep one");
  }
  options.train_strategy_yaml = config.train_strategy_yaml;
  options.train_strategy_source = config.source;
  options.trainer_ranks = config.trainer_ranks;
  options.experiment = config.experiment;
}

}  // namespace

namespace {

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
    rl::GrpoOptions from_config;
    std::deque<std::string> storage;
    if (split.own.count("rl-config-path")) add_rlvr_config(split, from_config, storage);
    launch::refuse_unread_flags(split, launch::grpo_unread_flags(), program);
    rl::GrpoOptions options = launch::read_grpo_flags(split.own);
    options.train_strategy_yaml = from_config.train_strategy_yaml;
    options.train_strategy_source = from_config.train_strategy_source;
    options.trainer_ranks = from_config.trainer_ranks;
    options.experiment = from_config.experiment;
    settings::TrainingArguments args = settings::parse_arguments(static_cast<int>(split.rest.size()), split.rest.data());
    if (!given(split.rest, "lr-decay-style")) args.lr_decay_style = "constant";  // verl's default: no decay unless asked for
    if (!given(split.rest, "log-interval")) args.log_interval = 1;                 // ROLL's logging_steps: every step
    runtime::keep_freed_host_memory();  // Note [Host memory]
    std::signal(SIGPIPE, SIG_IGN);       // a peer's closed socket is an error to report, as in megacpp-train
    return rl::run_grpo(std::move(args), options, program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { megacpp::end_process(run(argc, argv)); }
