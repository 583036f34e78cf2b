// ROLL's RLVR pipeline YAML (settings/rlvr_config.h) read by megacpp-grpo as the flags it means: a run
// from the YAML has the figures of the run from the flags, for an fsdp2_train actor beside a
// rollout rank, for a megatron_train one (TP 2 with sequence parallelism, recompute) with its
// megatron_infer reference, and for ROLL's algorithm keys (REINFORCE, whitening, clips, masks)
// and its run's bookkeeping (logging_steps, a TensorBoard tracker);
// what megacpp cannot honour is refused naming the file, line and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/distributed_test.h"
#include "tests/support/grpo_runs.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::grpo;
using testing::grpo_step_lines;
using testing::kGrpoArchitecture;
using testing::write_sum_prompts;

// What ROLL's keys left out mean there, where megacpp-grpo's defaults differ.
const std::string kRollDefaults = " --dual-clip-ratio 0 --loss-agg-mode seq-mean-token-mean";

const std::string kRlvrYaml = R"(seed: 1234
max_steps: 3
rollout_batch_size: 4
prompt_length: 12
response_length: 4
num_return_sequences_in_group: 4
ppo_epochs: 2
adv_estimator: grpo
pg_clip: 0.2
use_kl_loss: true
kl_loss_coef: 0.001
kl_loss_type: low_var_kl
actor_train:
  training_args:
    learning_rate: 1.0e-3
    weight_decay: 0
    per_device_train_batch_size: 2
    gradient_accumulation_steps: 2
    warmup_steps: 3
    lr_scheduler_type: cosine
  strategy_args:
    strategy_name: fsdp2_train
    strategy_config:
      fsdp_size: 2
      reshard_after_forward: true
  device_mapping: list(range(0,2))
  infer_batch_size: 4
actor_infer:
  generating_args:
    max_new_tokens: ${response_length}
    top_p: 0.99
    top_k: 100
    num_beams: 1
    temperature: 0.99
    num_return_sequences: ${num_return_sequences_in_group}
  strategy_args:
    strategy_name: hf_infer
  device_mapping: "[2]"
reference:
  strategy_args:
    strategy_name: fsdp2_infer
    strategy_config:
      fsdp_size: 2
      reshard_after_forward: true
  device_mapping: list(range(0,2))
  infer_batch_size: 4
)";

// megacpp-grpo on 3 ranks from the YAML's flags `from_yaml` and from `flags`: both succeed with the
// same `steps` step lines. Returns the first's output.
std::string expect_runs_as_flags(const std::string& from_yaml, const std::string& flags, const std::string& architecture, size_t steps) {
  const auto yaml_run = grpo(3, from_yaml, architecture), flags_run = grpo(3, flags, architecture);
  EXPECT_EQ(yaml_run.status, 0) << yaml_run.output;
  EXPECT_EQ(flags_run.status, 0) << flags_run.output;
  EXPECT_EQ(grpo_step_lines(yaml_run.output).size(), steps) << yaml_run.output;
  EXPECT_EQ(grpo_step_lines(yaml_run.output), grpo_step_lines(flags_run.output));
  return yaml_run.output;
}

// `yaml` with one text replaced: refused with `expected` (naming the file and line when asked:
// the last edit may be refused by megacpp-train's flags instead).
struct YamlEdit {
  std::string find, replace, expected;
};
void expect_refused_edits(const std::string& yaml, const std::vector<YamlEdit>& edits, const std::string& dir, const std::string& prompts,
                          const std::string& architecture, bool names_the_file) {
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < edits.size(); ++i) {
    std::string text = yaml;
    ASSERT_NE(text.find(edits[i].find), std::string::npos) << edits[i].find;
    text.replace(text.find(edits[i].find), edits[i].find.size(), edits[i].replace);
    const std::string bad = testing::write_file(dir, "bad" + std::to_string(i) + ".yaml", text);
    const auto run = grpo(3, prompts + " --rl-config-path " + bad, architecture);
    EXPECT_NE(run.status, 0) << text;
    if (names_the_file) EXPECT_NE(run.output.find(bad + ":"), std::string::npos) << "names the file and line\n" << run.output;
    EXPECT_NE(run.output.find(edits[i].expected), std::string::npos) << text << "\n" << run.output;
  }
}

TEST(GrpoProgram, RollsRlvrConfigRunsAsTheFlagsItMeans) {
  // Weights drawn wide, so that each step's entropy depends on what was sampled: a setting read
  // wrongly changes the figures.
  const std::string architecture = kGrpoArchitecture + " --init-method-std 0.5";
  const std::string dir = testing::scratch_dir();
  const std::string prompts = " --prompts " + write_sum_prompts(dir, "train.jsonl", 20);
  const std::string yaml = testing::write_file(dir, "rlvr.yaml", kRlvrYaml);
  const std::string strategy = testing::write_file(dir, "fsdp2.yaml", "strategy_args:\n  strategy_name: fsdp2_train\n  strategy_config:\n"
                                                                       "    fsdp_size: 2\n    reshard_after_forward: true\n");
  const std::string output = expect_runs_as_flags(
      prompts + " --rl-config-path " + yaml,
      prompts + " --seed 1234 --train-iters 3 --rollout-batch-size 4 --seq-length 16 --response-length 4 "
                "--num-return-sequences-in-group 4 --clip-ratio 0.2 --kl-coef 0.001 --kl-loss-type low_var_kl --lr 1e-3 "
                "--weight-decay 0 --ppo-micro-batch-size 2 --gradient-accumulation-steps 2 --ppo-epochs 2 --lr-warmup-iters 3 "
                "--lr-decay-style cosine --use-torch-fsdp2 --fsdp2-config-path " + strategy +
                " --infer-batch-size 4 --top-p 0.99 --top-k 100 --temperature 0.99 --rollout-ranks 1" + kRollDefaults,
      architecture, 3);
  EXPECT_NE(output.find("trainer FSDP (fsdp=2) on 2 rank(s), rollout on rank(s) 2"), std::string::npos) << output;

  const std::vector<YamlEdit> edits = {
      {"lr_scheduler_type: cosine", "lr_scheduler_type: polynomial",
       "key 'actor_train.training_args.lr_scheduler_type': expected constant, constant_with_warmup, linear or cosine"},
      {"adv_estimator: grpo", "adv_estimator: gae", "key 'adv_estimator': megacpp-grpo has grpo and reinforce, got 'gae'"},
      {"adv_estimator: grpo", "adv_estimator: grpo\nnorm_std_type: batch", "key 'norm_std_type': adv_estimator grpo normalizes within"},
      {"adv_estimator: grpo", "", "key 'adv_estimator': not given: ROLL's default is gae"},
      {"pg_clip: 0.2", "pg_clip: 0.2\nlength_loss_weight: true", "key 'length_loss_weight': must be false"},
      {"pg_clip: 0.2", "pg_clip: 0.2\ntrack_with: wandb", "key 'track_with': megacpp-grpo tracks with tensorboard"},
      {"    strategy_name: hf_infer", "    strategy_name: vllm\n    strategy_config:\n      gpu_memory_utilization: 0.8",
       "key 'actor_infer.strategy_args.strategy_config': megacpp generates with its own engine"},
      {"  device_mapping: \"[2]\"", "  device_mapping: \"[3]\"",
       "key 'actor_infer.device_mapping': the rollout shares actor_train's ranks (colocated) or takes the ranks right after them"},
      {"kl_loss_type: low_var_kl", "kl_loss_type: low_var_kl\nrunning_reward: 10", "key 'running_reward': not read by megacpp-grpo (it reads seed"},
  };
  expect_refused_edits(kRlvrYaml, edits, dir, prompts, architecture, /*names_the_file=*/true);
  const auto twice = grpo(3, prompts + " --rl-config-path " + yaml + " --lr 1e-2", architecture);
  EXPECT_NE(twice.output.find("--lr is given on the command line and by " + yaml + "; keep one"), std::string::npos) << twice.output;
}

const std::string kMegatronRlvrYaml = R"(seed: 1234
max_steps: 2
rollout_batch_size: 4
prompt_length: 12
response_length: 4
num_return_sequences_in_group: 4
ppo_epochs: 1
adv_estimator: grpo
use_kl_loss: true
kl_loss_coef: 0.001
actor_train:
  training_args:
    learning_rate: 1.0e-3
    weight_decay: 0
    per_device_train_batch_size: 4
    gradient_accumulation_steps: 2
  strategy_args:
    strategy_name: megatron_train
    strategy_config:
      tensor_model_parallel_size: 2
      pipeline_model_parallel_size: 1
      virtual_pipeline_model_parallel_size: ~
      expert_model_parallel_size: 1
      expert_tensor_parallel_size: 1
      sequence_parallel: true
      use_distributed_optimizer: true
      recompute_granularity: full
      recompute_method: uniform
      recompute_num_layers: 1
  device_mapping: list(range(0,2))
  infer_batch_size: 4
actor_infer:
  generating_args:
    max_new_tokens: ${response_length}
    temperature: 0.99
    num_return_sequences: ${num_return_sequences_in_group}
  strategy_args:
    strategy_name: vllm
  device_mapping: "[2]"
reference:
  strategy_args:
    strategy_name: megatron_infer
    strategy_config:
      tensor_model_parallel_size: 2
      pipeline_model_parallel_size: 1
  device_mapping: list(range(0,2))
  infer_batch_size: 4
)";

// ROLL's megatron_train strategy: its strategy_config keys are Megatron's flags of the same names
// (the run's figures are those of the flags), the reference's megatron_infer must split as the
// actor, and what megacpp cannot honour is refused naming the key (or, for a Megatron value
// megacpp-train refuses, the flag).
TEST(GrpoProgram, RollsMegatronStrategyRunsAsMegatronsFlags) {
  const std::string architecture = kGrpoArchitecture + " --init-method-std 0.5";
  const std::string dir = testing::scratch_dir();
  const std::string prompts = " --prompts " + write_sum_prompts(dir, "train.jsonl", 20);
  const std::string output = expect_runs_as_flags(
      prompts + " --rl-config-path " + testing::write_file(dir, "rlvr.yaml", kMegatronRlvrYaml),
      prompts + " --seed 1234 --train-iters 2 --rollout-batch-size 4 --seq-length 16 --response-length 4 "
                "--num-return-sequences-in-group 4 --kl-coef 0.001 --lr 1e-3 --weight-decay 0 --ppo-micro-batch-size 4 "
                "--gradient-accumulation-steps 2 --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer "
                "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --infer-batch-size 4 "
                "--temperature 0.99 --rollout-ranks 1" + kRollDefaults,
      architecture, 2);
  EXPECT_NE(output.find("trainer FSDP (fsdp=1), TP 2 (data-parallel 1) on 2 rank(s), rollout on rank(s) 2"), std::string::npos) << output;

  const std::vector<YamlEdit> edits = {
      {"      expert_tensor_parallel_size: 1", "      expert_tensor_parallel_size: 2",
       "key 'actor_train.strategy_args.strategy_config.expert_tensor_parallel_size': must be 1 (megacpp has no expert tensor parallelism"},
      {"      recompute_num_layers: 1", "      recompute_num_layers: 1\n      moe_router_dtype: fp32",
       "key 'actor_train.strategy_args.strategy_config.moe_router_dtype': not read by megacpp-grpo"},
      {"      tensor_model_parallel_size: 2\n      pipeline_model_parallel_size: 1\n  device_mapping",
       "      tensor_model_parallel_size: 1\n      pipeline_model_parallel_size: 1\n  device_mapping",
       "key 'reference.strategy_args.strategy_config.tensor_model_parallel_size': is 1, actor_train's 2: megacpp-grpo splits the reference"},
      {"      recompute_num_layers: 1", "      recompute_num_layers: 1\n      moe_token_dispatcher_type: flex",
       "--moe-token-dispatcher-type flex: not supported (only allgather|alltoall|alltoall_seq)"},
  };
  expect_refused_edits(kMegatronRlvrYaml, edits, dir + "/megatron", prompts, architecture, /*names_the_file=*/false);
}

const std::string kReinforceYaml = R"(max_steps: 3
rollout_batch_size: 8
response_length: 1
num_return_sequences_in_group: 8
adv_estimator: reinforce
norm_mean_type: group
norm_std_type: batch
reward_clip: 10
advantage_clip: 1.5
whiten_advantages: true
whiten_rewards: false
value_clip: 0.5
dual_clip_loss: true
pg_clip: 0.25
use_pg_clip_range: true
pg_clip_low: 0.2
pg_clip_high: 0.28
loss_agg_mode: seq-mean-token-sum
difficulty_mask: true
difficulty_low_threshold: 0.1
difficulty_high_threshold: 0.95
error_max_len_clip: true
error_max_len_threshold: 2
difficulty_loss_weight: false
length_loss_weight: false
use_kl_loss: true
kl_loss_coef: 0.01
entropy_loss_coef: 0.01
importance_sampling: seq
actor_train:
  training_args:
    learning_rate: 1.0
    per_device_train_batch_size: 8
    gradient_accumulation_steps: 2
  strategy_args:
    strategy_name: fsdp2_train
    strategy_config:
      fsdp_size: 2
  device_mapping: list(range(0,2))
actor_infer:
  generating_args:
    temperature: 1.0
  strategy_args:
    strategy_name: hf_infer
  device_mapping: list(range(0,2))
)";

// ROLL's algorithm keys (an Ascend RLVR example's: REINFORCE with whitening, clips, the dual clip
// and the difficulty mask; pg_clip_low/high, a loss_agg_mode) and its run's bookkeeping (hydra,
// exp_name, logging_steps, a TensorBoard tracker) are the flags they mean: a colocated run over
// FSDP 2 from the YAML takes the steps of the run from the flags (the same lines every 2 steps
// and the last, the same TensorBoard scalars every step, the reward the line prints), and some
// responses are left out (rewards from the first step: numbers as tokens, one-token answers).
TEST(GrpoProgram, RollsAlgorithmAndRunKeysRunAsTheFlagsTheyMean) {
  const std::string dir = testing::scratch_dir();
  const std::string prompts = " --prompts " + testing::write_number_sum_prompts(dir, "train.jsonl", 24) + " --adam-eps 1";
  const std::string strategy = testing::write_file(dir, "fsdp2.yaml", "strategy_args:\n  strategy_name: fsdp2_train\n  strategy_config:\n"
                                                                       "    fsdp_size: 2\n");
  const std::string bookkeeping = "hydra:\n  run:\n    dir: .\n  output_subdir: null\nexp_name: number-sums\nlogging_steps: 2\n"
                                  "track_with: tensorboard\ntracker_kwargs:\n  log_dir: " + dir + "/tb_yaml\n";
  const std::string yaml = testing::write_file(dir, "rlvr.yaml", bookkeeping + kReinforceYaml);
  const auto yaml_run = grpo(2, prompts + " --rl-config-path " + yaml, testing::kGrpoNumbersModel);
  const auto flags_run = grpo(2, prompts + " --train-iters 3 --rollout-batch-size 8 --response-length 1 "
                                 "--num-return-sequences-in-group 8 --adv-estimator reinforce --norm-mean-type group --norm-std-type batch "
                                 "--reward-clip 10 --advantage-clip 1.5 --whiten-advantages --dual-clip-ratio 1.5 --clip-ratio 0.25 "
                                 "--clip-ratio-low 0.2 --clip-ratio-high 0.28 --loss-agg-mode seq-mean-token-sum --difficulty-mask "
                                 "--difficulty-low-threshold 0.1 --difficulty-high-threshold 0.95 --error-max-len-clip "
                                 "--error-max-len-threshold 2 --kl-coef 0.01 --entropy-coeff 0.01 --importance-sampling seq --lr 1 --ppo-micro-batch-size 8 --gradient-accumulation-steps 2 "
                                 "--use-torch-fsdp2 --fsdp2-config-path " + strategy + " --temperature 1.0 --log-interval 2 --tensorboard-dir " +
                                 dir + "/tb_flags",
                              testing::kGrpoNumbersModel);
  ASSERT_EQ(yaml_run.status, 0) << yaml_run.output;
  ASSERT_EQ(flags_run.status, 0) << flags_run.output;
  const std::vector<std::string> lines = grpo_step_lines(yaml_run.output);
  ASSERT_EQ(lines.size(), 2u) << yaml_run.output;
  EXPECT_EQ(lines[0].rfind("grpo step 2/3", 0), 0u) << lines[0];
  EXPECT_EQ(lines, grpo_step_lines(flags_run.output));
  EXPECT_NE(yaml_run.output.find("megacpp-grpo number-sums | model llama"), std::string::npos) << yaml_run.output;
  EXPECT_GE(testing::count_matches(yaml_run.output, R"(\| responses kept 0\.[0-9]*[1-9][0-9]* \|)"), 1) << "some kept, some not\n" << yaml_run.output;

  const auto from_yaml = testing::read_tensorboard(dir + "/tb_yaml"), from_flags = testing::read_tensorboard(dir + "/tb_flags");
  for (const std::string tag : {"reward", "response-length", "responses-kept", "kl", "entropy", "clip-fraction", "policy-loss", "approx-kl",
                                "learning-rate"}) {
    for (int64_t step = 1; step <= 3; ++step) {
      ASSERT_EQ(from_yaml.count({tag, step}), 1u) << tag << " at step " << step;
      EXPECT_EQ(from_yaml.at({tag, step}), from_flags.at({tag, step})) << tag << " at step " << step;
    }
  }
  std::smatch reward;
  ASSERT_TRUE(std::regex_search(lines[0], reward, std::regex(R"(reward ([0-9.]+))")));
  EXPECT_NEAR(from_yaml.at({"reward", 2}), std::stod(reward[1]), 1e-4);
}
}  // namespace
}  // namespace megacpp
