#include "rl/grpo_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "io/data/tokenizer/tokenizer.h"
#include "megacpp/logging.h"
#include "parallel/collectives.h"
#include "parallel/launch_environment.h"
#include "rl/exact_answer.h"
#include "rl/grpo_log.h"
#include "rl/remote_rollout.h"
#include "settings/fsdp2_config_yaml.h"
#include "settings/parallelism.h"
#include "training/checkpointing.h"
#include "runtime/heartbeat.h"
#include "training/optim/lr_schedule.h"
#include "runtime/model_setup.h"
#include "runtime/model_weights.h"
#include "training/optim/optimizer.h"
#include "training/reporting/parameter_dump.h"

namespace megacpp::rl {
namespace {

using Clock = std::chrono::steady_clock;

void check_options(const settings::TrainingArguments& args, const GrpoOptions& o) {
  auto refuse = [](const std::string& why) { throw std::invalid_argument(why); };
  if (o.prompts.empty()) refuse("--prompts (JSON lines {\"prompt\": ..., \"answer\": ...}) is required");
  if (o.rollout_batch_size <= 0 || o.group_size <= 0 || o.response_length <= 0) {
    refuse("--rollout-batch-size, --num-return-sequences-in-group and --response-length must be positive");
  }
  if (o.group_size < 2) refuse("--num-return-sequences-in-group 1: GRPO's advantages compare a group's responses; give 2 or more");
  if (!(o.temperature > 0)) refuse("--temperature must be positive (greedy responses would all be the same)");
  if (o.rollout_ranks < 0 || o.eval_interval < 0 || o.kl_coef < 0 || o.sync_chunk_mb <= 0 || o.micro_batch_size <= 0 || o.infer_batch_size <= 0) {
    refuse("--rollout-ranks, --eval-interval and --kl-coef must be >= 0; --weight-sync-chunk-mb, --ppo-micro-batch-size and "
           "--infer-batch-size positive");
  }
  if (o.mini_batch_size < 0 || o.gradient_accumulation < 0 || o.epochs <= 0) {
    refuse("--ppo-mini-batch-size and --gradient-accumulation-steps must be positive (or 0: one step per rollout batch), --ppo-epochs "
           "positive");
  }
  if (o.mini_batch_size > 0 && o.gradient_accumulation > 0) {
    refuse("--ppo-mini-batch-size (verl's) and --gradient-accumulation-steps (ROLL's) both size the mini-batch; give one");
  }
  if (o.mini_batch_size > 0 && o.rollout_batch_size % o.mini_batch_size != 0) {
    refuse("--ppo-mini-batch-size " + std::to_string(o.mini_batch_size) + " does not divide --rollout-batch-size " +
           std::to_string(o.rollout_batch_size));
  }
  if (args.train_iters <= 0) refuse("--train-iters: the number of GRPO steps (ROLL's max_steps) must be positive");
  if (args.seq_length <= o.response_length) {
    refuse("--seq-length " + std::to_string(args.seq_length) + " leaves no room for a prompt beside --response-length " +
           std::to_string(o.response_length));
  }
  kl_estimator_named(o.kl_estimator);  // throws naming the accepted names
  reward_shaping(o.objective);         // these throw naming the flag at fault
}

// Prompt indices of step `step`: --rollout-batch-size of them, walking through the prompts in an
// order shuffled anew (seeded) each epoch; this data-parallel rank's consecutive share.
std::vector<size_t> step_prompts(int64_t step, int64_t batch, size_t count, uint64_t seed, int dp_size, int dp_rank) {
  std::vector<size_t> chosen;
  const int64_t share = batch / dp_size;
  std::vector<size_t> order(count);
  int64_t epoch = -1;
  for (int64_t i = dp_rank * share; i < (dp_rank + 1) * share; ++i) {
    const int64_t global = step * batch + i, e = global / static_cast<int64_t>(count);
    if (e != epoch) {
      epoch = e;
      std::iota(order.begin(), order.end(), size_t{0});
      std::shuffle(order.begin(), order.end(), std::mt19937_64(seed + static_cast<uint64_t>(e)));
    }
    chosen.push_back(order[static_cast<size_t>(global % static_cast<int64_t>(count))]);
  }
  return chosen;
}


class GrpoRun {
 public:
  GrpoRun(const settings::JobConfig& job, const GrpoOptions& options) : job_(job), options_(options) {}

  int run() {
    heartbeat_.beat("starting: rendezvous and models");
    start();
    if (groups_ && groups_->is_worker()) return serve();
    build_trainer();
    read_data();
    const RewardShaping shaping = step_settings(0).shaping;
    log_ = std::make_unique<GrpoLog>(args_, setup_.runtime->rank() == 0,
                                     shaping.max_len_mask || shaping.difficulty_mask || shaping.error_max_len_clip);
    log_start();
    train();
    return 0;
  }

 private:
  void start() {
    setup_ = runtime::start_processes(job_);
    if (options_.rollout_ranks > 0) {
      groups_ = split_rollout_ranks(*setup_.runtime, job_.launch.world_size - options_.rollout_ranks, settings::distributed_timeout(args_));
    }
    trainers_ = groups_ ? groups_->trainers : setup_.runtime->world();
    tokenizer_ = io::data::build_tokenizer(args_.tokenizer);
  }

  WeightBroadcastOptions sync_options() const { return {options_.sync_chunk_mb << 20, setup_.device}; }

  // An unsharded model for generation, its weights to come from the actor.
  std::shared_ptr<models::LanguageModel> rollout_model() const {
    settings::TrainingArguments unsharded = args_;
    unsharded.init_model_with_meta_device = false;
    auto model = runtime::build_model(unsharded, setup_.device);
    model->to(setup_.device);
    return model;
  }

  int serve() {
    auto model = rollout_model();
    RolloutWorker worker(*model, *groups_, sync_options());
    heartbeat_.beat("serving rollouts");
    const int64_t steps = worker.serve();
    spdlog::info("rollout worker {}: served {} requests", setup_.runtime->rank(), steps);
    return 0;
  }

  void build_trainer();
  void read_data();
  int64_t mini_batch_responses(int dp) const;
  void plan_learning_rate();
  void log_start() const;
  void train();
  GrpoSettings step_settings(int64_t step) const;
  void evaluate(int64_t step);

  const settings::JobConfig& job_;  // resolved once (Note [Job configuration])
  const settings::TrainingArguments& args_ = job_.args;
  const GrpoOptions options_;
  runtime::Heartbeat heartbeat_;  // progress for megacpp-run's hang detection
  runtime::ProcessSetup setup_;
  std::optional<RolloutGroups> groups_;  // with --rollout-ranks
  parallel::Group trainers_;
  std::unique_ptr<io::data::Tokenizer> tokenizer_;
  std::shared_ptr<models::LanguageModel> actor_, reference_, rollout_model_;
  bool reference_is_base_ = false;  // the reference is the LoRA actor with its adapters off
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<training::TrainingCheckpointer> checkpointer_;
  training::TrainingProgress progress_;
  std::unique_ptr<RolloutEngine> rollout_;  // colocated or remote
  std::unique_ptr<SharedByModelParallelGroup> shared_;  // beside TP or Ulysses: the rollout, once per group
  RolloutEngine& engine() const { return shared_ ? static_cast<RolloutEngine&>(*shared_) : *rollout_; }
  std::vector<PromptExample> prompts_, eval_prompts_;
  int64_t mini_batch_responses_ = 0;  // per optimizer step on each rank (0: the whole batch)
  std::unique_ptr<training::optim::LearningRateSchedule> schedule_;  // over optimizer steps
  int64_t updates_per_step_ = 1, updates_ = 0;                 // optimizer steps per GRPO step, taken so far
  RewardFunction reward_;
  std::unique_ptr<GrpoLog> log_;
};

void GrpoRun::build_trainer() {
  heartbeat_.beat("building, sharding and loading the actor and the reference");
  const bool has_weights = !args_.load.empty() || !args_.init_from_hf_path.empty();
  actor_ = runtime::build_model(args_, setup_.device);
  // LoRA adapters a base checkpoint does not hold start from their initialization, as megacpp-train's.
  runtime::parallelize_model(*actor_, setup_, job_, /*initialize=*/!has_weights || args_.lora.rank > 0);
  std::vector<at::Tensor> params = actor_->parameters();
  optimizer_ = training::optim::make_optimizer(args_, params);
  checkpointer_ = std::make_unique<training::TrainingCheckpointer>(args_, *setup_.runtime, *setup_.mesh,
                                                                   job_.fsdp.async_save_ckpt);
  if (!args_.load.empty()) {
    progress_ = checkpointer_->load(*actor_, *optimizer_);
  } else if (has_weights) {
    runtime::load_model_weights(args_, *setup_.mesh, *actor_);
  }
  // A LoRA actor's reference is its frozen base: the actor with its adapters off (verl's), unless
  // --reference-load names another model.
  reference_is_base_ = options_.kl_coef > 0 && args_.lora.rank > 0 && options_.reference_load.empty();
  if (options_.kl_coef > 0 && !reference_is_base_) {
    settings::JobConfig reference = job_;  // the actor's job, another checkpoint
    if (!options_.reference_load.empty()) {
      reference.args.load = options_.reference_load;
      reference.args.ckpt_step = -1;
    }
    const bool loads = !reference.args.load.empty() || !reference.args.init_from_hf_path.empty();
    reference_ = runtime::build_model(reference.args, setup_.device);
    runtime::parallelize_model(*reference_, setup_, reference, /*initialize=*/!loads);
    if (loads) runtime::load_model_weights(reference.args, *setup_.mesh, *reference_);
    for (auto& p : reference_->parameters()) p.set_requires_grad(false);
  }
  if (groups_) {
    rollout_ = std::make_unique<RemoteRollout>(*actor_, *groups_, sync_options());
  } else if (first_of_model_parallel_group(*setup_.mesh)) {
    rollout_model_ = rollout_model();
    rollout_ = std::make_unique<ColocatedRollout>(*rollout_model_);
    rollout_->sync(*actor_);
  } else {  // the group's first rank generates for it (SharedByModelParallelGroup below)
    rollout_ = std::make_unique<SyncOnlyRollout>();
    rollout_->sync(*actor_);
  }
  const parallel::Group& group = model_parallel_group(*setup_.mesh);  // a TP or a Ulysses group trains on the same prompts
  if (group.size() > 1) shared_ = std::make_unique<SharedByModelParallelGroup>(*rollout_, group, setup_.device);
}

void GrpoRun::read_data() {
  const int64_t prompt_room = args_.seq_length - options_.response_length;
  prompts_ = read_prompts(options_.prompts, "--prompts", *tokenizer_, prompt_room);
  if (!options_.eval_prompts.empty()) eval_prompts_ = read_prompts(options_.eval_prompts, "--eval-prompts", *tokenizer_, prompt_room);
  std::vector<PromptExample> every = prompts_;
  every.insert(every.end(), eval_prompts_.begin(), eval_prompts_.end());
  reward_ = exact_answer_reward(every, *tokenizer_, {tokenizer_->eod()});
  const int dp = setup_.mesh->data_parallel_size();
  if (options_.rollout_batch_size % dp != 0) {
    throw std::invalid_argument("--rollout-batch-size " + std::to_string(options_.rollout_batch_size) + " does not divide among the " +
                                std::to_string(dp) + " data-parallel trainer ranks");
  }
  mini_batch_responses_ = mini_batch_responses(dp);
  plan_learning_rate();
}

// Megatron's schedule over the optimizer steps (as Megatron's and ROLL's schedulers step with the
// optimizer): with mini-batches several per GRPO step, --lr-decay-iters by default all of them.
void GrpoRun::plan_learning_rate() {
  const int64_t mine = options_.rollout_batch_size / setup_.mesh->data_parallel_size() * options_.group_size;
  updates_per_step_ = options_.epochs * (mini_batch_responses_ > 0 ? mine / mini_batch_responses_ : 1);
  settings::TrainingArguments over_updates = args_;
  over_updates.train_iters = args_.train_iters * updates_per_step_;
  schedule_ = std::make_unique<training::optim::LearningRateSchedule>(over_updates, /*global_batch=*/1);
}

// Responses per optimizer step on each rank (0: the rank's whole batch), checked to divide it.
int64_t GrpoRun::mini_batch_responses(int dp) const {
  const int64_t mine = options_.rollout_batch_size / dp * options_.group_size;
  int64_t mini = 0;
  std::string named;
  if (options_.mini_batch_size > 0) {
    if (options_.mini_batch_size % dp != 0) {
      throw std::invalid_argument("--ppo-mini-batch-size " + std::to_string(options_.mini_batch_size) + " does not divide among the " +
                                  std::to_string(dp) + " data-parallel trainer ranks");
    }
    mini = options_.mini_batch_size / dp * options_.group_size;
    named = "--ppo-mini-batch-size " + std::to_string(options_.mini_batch_size);
  } else if (options_.gradient_accumulation > 0) {
    mini = options_.micro_batch_size * options_.gradient_accumulation;
    named = "--ppo-micro-batch-size x --gradient-accumulation-steps (" + std::to_string(mini) + " responses per rank)";
  }
  if (mini > 0 && mine % mini != 0) {
    throw std::invalid_argument(named + " does not divide each data-parallel rank's " + std::to_string(mine) +
                                " responses (--rollout-batch-size / data-parallel ranks x --num-return-sequences-in-group)");
  }
  return mini;
}

void GrpoRun::log_start() const {
  if (setup_.runtime->rank() != 0) return;
  for (const auto& note : args_.notes) spdlog::info("{}", note);
  const std::string rollout = groups_ ? fmt::format("rollout on rank(s) {}", parallel::rank_list(groups_->workers.global_ranks))
                                      : std::string("rollout colocated");
  spdlog::info("megacpp-grpo{} | model {} | trainer {} on {} rank(s), {} | device {} | {} prompts from {}, {} per step x {} responses, "
               "up to {} new tokens | KL coef {} ({}{})",
               options_.experiment.empty() ? std::string() : " " + options_.experiment, args_.model_type,
               args_.use_torch_fsdp2 ? setup_.mesh->describe() : std::string("no FSDP"), setup_.mesh->world_size(),
               rollout, setup_.device.str(), prompts_.size(), options_.prompts, options_.rollout_batch_size, options_.group_size,
               options_.response_length, options_.kl_coef, options_.kl_estimator,
               reference_is_base_ ? "; reference: the actor without its LoRA adapters" : "");
}

GrpoSettings GrpoRun::step_settings(int64_t step) const {
  GrpoSettings s;
  s.responses_per_prompt = options_.group_size;
  s.sampling.temperature = options_.temperature;
  s.sampling.top_p = options_.top_p;
  s.sampling.top_k = options_.top_k;
  // One stream per data-parallel rank (the ranks of a TP group share their prompts' responses).
  s.sampling.seed =
      static_cast<uint64_t>(args_.seed) * 1000003u + static_cast<uint64_t>(step) * 1009u + static_cast<uint64_t>(setup_.mesh->data_parallel_rank());
  s.sampling.max_new_tokens = options_.response_length;
  s.sampling.max_length = args_.seq_length;
  s.sampling.stop = {tokenizer_->eod()};
  s.sampling.vocabulary = tokenizer_->vocab_size();
  s.sampling.kv_cache = actor_->takes_kv_cache();
  s.shaping = reward_shaping(options_.objective);
  s.update.policy = policy_loss_options(options_.objective);
  s.update.entropy_coef = options_.objective.entropy_coeff;
  s.update.kl_coef = options_.kl_coef;
  s.update.kl = kl_estimator_named(options_.kl_estimator);
  s.update.temperature = options_.temperature;
  s.update.micro_batch_size = options_.micro_batch_size;
  s.update.device = setup_.device;
  s.update.fsdp = args_.use_torch_fsdp2;
  s.infer_batch_size = options_.infer_batch_size;
  s.clip_grad = args_.clip_grad;
  s.mini_batch_size = mini_batch_responses_;
  s.epochs = options_.epochs;
  s.position_multiple = (args_.sequence_parallel ? setup_.mesh->tp().size() : 1) * setup_.mesh->cp().size();
  s.update.cp = setup_.mesh->cp();
  s.reference_is_actor_base = reference_is_base_;
  return s;
}

void GrpoRun::train() {
  evaluate(progress_.iteration);
  const parallel::DeviceMesh& mesh = *setup_.mesh;
  int64_t last_saved = progress_.iteration;
  for (int64_t step = progress_.iteration; step < args_.train_iters; ++step) {
    heartbeat_.beat(fmt::format("GRPO step {}", step + 1));
    std::vector<std::vector<int64_t>> prompts;
    for (size_t i : step_prompts(step, options_.rollout_batch_size, prompts_.size(), static_cast<uint64_t>(args_.seed),
                                 mesh.data_parallel_size(), mesh.data_parallel_rank())) {
      prompts.push_back(prompts_[i].ids);
    }
    const auto start = Clock::now();
    // Also where a resumed run left off. A step that kept no response took no optimizer step and
    // does not move the schedule (as ROLL's scheduler); its samples are counted as skipped.
    updates_ = (step - progress_.skipped_samples / options_.rollout_batch_size) * updates_per_step_;
    GrpoSettings settings = step_settings(step);
    settings.before_step = [this] {
      ++updates_;
      training::optim::set_learning_rate(*optimizer_, schedule_->at(updates_), schedule_->decoupled_at(updates_));
    };
    const GrpoStepStats stats = grpo_step(*actor_, *optimizer_, engine(), reference_.get(), prompts, reward_, settings, mesh, trainers_);
    log_->step(step + 1, stats, schedule_->at(updates_), std::chrono::duration<double>(Clock::now() - start).count());
    progress_.iteration = step + 1;
    progress_.consumed_train += options_.rollout_batch_size;
    if (stats.skipped) progress_.skipped_samples += options_.rollout_batch_size;
    if (checkpointer_->due(progress_.iteration)) {
      checkpointer_->save(progress_, *actor_, *optimizer_);
      last_saved = progress_.iteration;
    }
    if (options_.eval_interval > 0 && progress_.iteration % options_.eval_interval == 0 && progress_.iteration < args_.train_iters) {
      evaluate(progress_.iteration);
    }
  }
  if (!args_.save.empty() && last_saved != progress_.iteration) checkpointer_->save(progress_, *actor_, *optimizer_);
  evaluate(progress_.iteration);
  if (!args_.dump_final_params.empty()) training::reporting::dump_parameters(*actor_, args_.dump_final_params, setup_.runtime->rank());
  if (auto* remote = dynamic_cast<RemoteRollout*>(rollout_.get())) remote->finish();
  checkpointer_->finish();
}

// Greedy answers to this data-parallel rank's share of the held-out prompts; the share answered
// exactly, over the data-parallel ranks (each TP or Ulysses group's answers counted once).
void GrpoRun::evaluate(int64_t step) {
  if (eval_prompts_.empty()) return;
  heartbeat_.beat(fmt::format("evaluating at step {}", step));
  inference::Sampling greedy = step_settings(step).sampling;
  greedy.temperature = 0;
  std::vector<std::vector<int64_t>> mine;
  const int dp = setup_.mesh->data_parallel_size(), rank = setup_.mesh->data_parallel_rank();
  for (size_t i = static_cast<size_t>(rank); i < eval_prompts_.size(); i += static_cast<size_t>(dp)) mine.push_back(eval_prompts_[i].ids);
  const auto answers = engine().generate(mine, 1, greedy);
  double correct = 0;
  for (size_t i = 0; i < mine.size(); ++i) correct += reward_(mine[i], answers[i].tokens);
  const double counted = first_of_model_parallel_group(*setup_.mesh) ? 1 : 0;
  at::Tensor totals = torch::tensor({counted * correct, counted * static_cast<double>(mine.size())}, torch::kDouble).to(setup_.device);
  parallel::all_reduce(trainers_, totals, parallel::ReduceOp::kSum).wait();
  totals = totals.to(torch::kCPU);
  log_->evaluation(step, totals[0].item<double>(), totals[1].item<double>());
}


// The job of the trainer ranks: the rollout ranks outside the mesh, ROLL's actor_train
// strategy_config over the FSDP2 config of the flags.
settings::JobConfig resolve_grpo_job(settings::TrainingArguments args, const GrpoOptions& o) {
  const int world = parallel::read_launch_environment().world_size, trainers = world - o.rollout_ranks;
  if (trainers < 1) {
    throw std::invalid_argument("--rollout-ranks " + std::to_string(o.rollout_ranks) + " leaves no trainer rank in a world of " +
                                std::to_string(world));
  }
  settings::JobLayout layout;
  layout.other_ranks = o.rollout_ranks;
  layout.amend = [&o](settings::FSDP2Config& config) {
    if (!o.train_strategy_yaml.empty()) config = settings::parse_fsdp2_config(o.train_strategy_yaml, o.train_strategy_source, config);
  };
  settings::JobConfig job = runtime::resolve_job(std::move(args), layout);
  if (o.trainer_ranks > 0 && o.trainer_ranks != trainers) {
    throw std::invalid_argument("actor_train.device_mapping in " + o.train_strategy_source + " names " + std::to_string(o.trainer_ranks) +
                                " trainer rank(s); the job has " + std::to_string(trainers) + " beside " +
                                std::to_string(o.rollout_ranks) + " rollout rank(s)");
  }
  if (policy_loss_options(o.objective).sequence_ratio && job.dims.cp > 1) {
    const std::string cp = job.args.context_parallel_size > 1 ? "--context-parallel-size" : "the FSDP2 config's ulysses_size";
    throw std::invalid_argument("--importance-sampling seq: a response's ratio needs all its positions, which " + cp + " splits over ranks");
  }
  return job;
}

}  // namespace

int run_grpo(settings::TrainingArguments args, const GrpoOptions& options, const char* program) {
  try {
    check_options(args, options);
    runtime::use_kernel_fusion(args);
    const settings::JobConfig job = resolve_grpo_job(std::move(args), options);
    return GrpoRun(job, options).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    std::fflush(stderr);
    return 1;
  }
}

}  // namespace megacpp::rl
