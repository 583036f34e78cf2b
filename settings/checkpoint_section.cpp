// The checkpointing section (Note [Flag sections]): where checkpoints are saved and loaded
// from, what they hold, and how a run starts from one. Reads after the LoRA section
// (--lora-load loads too).
#include <stdexcept>

#include "megacpp/errors.h"
#include "settings/flag_section.h"

namespace megacpp::settings {
namespace {

void declare_checkpoint_flags(cxxopts::Options& o) {
  o.add_options("checkpointing")
      ("save", "save checkpoints under this directory (DIR/iter_0000100/)", cxxopts::value<std::string>()->default_value(""))
      ("save-interval", "iterations between checkpoints (one is also saved at the end)", cxxopts::value<std::string>()->default_value("0"))
      ("load", "resume from the latest checkpoint under this directory", cxxopts::value<std::string>()->default_value(""))
      ("init-from-hf-path", "a Hugging Face folder (config.json, safetensors, tokenizer): train its model, starting from its "
       "weights unless --load holds a checkpoint", cxxopts::value<std::string>()->default_value(""))
      ("model-id", "with --init-from-hf-path: the model the folder must hold (MindSpeed-LLM's ids: llama, qwen2, qwen2.5, "
       "qwen3, qwen3_moe)", cxxopts::value<std::string>())
      ("ckpt-step", "with --load (--lora-load when given): the iteration to load instead of the latest", cxxopts::value<std::string>()->default_value("-1"))
      ("ckpt-format", "torch_dist (Megatron) or torch_dcp (PyTorch DCP)", cxxopts::value<std::string>()->default_value("torch_dist"))
      ("no-save-optim", "do not save the optimizer state")
      ("no-load-optim", "do not load the optimizer state")
      ("no-load-rng", "do not load the random number generator states")
      ("no-save-rng", "do not save the random number generator states")
      ("exit-on-missing-checkpoint", "stop when --load has no checkpoint instead of training from scratch")
      ("use-checkpoint-args", "train the model the --load checkpoint holds (its args), not the one the model flags describe")
      ("finetune", "load only the model weights and start at iteration 0")
      ("dist-ckpt-strictness", "tensors in the --load checkpoint the model does not have: raise_unexpected, raise_all, "
       "log_unexpected, log_all, assume_ok_unexpected or ignore_all (the last four need --finetune)",
       cxxopts::value<std::string>()->default_value("raise_unexpected"))
      ("async-save", "write checkpoints in the background while training goes on")
      ("no-initialization", "skip weight initialization (the weights come from --load)");
}

UnexpectedKeys unexpected_keys_policy(const std::string& value) {
  if (value == "raise_unexpected" || value == "raise_all") return UnexpectedKeys::kRaise;
  if (value == "log_unexpected" || value == "log_all") return UnexpectedKeys::kLog;
  if (value == "assume_ok_unexpected" || value == "ignore_all") return UnexpectedKeys::kIgnore;
  throw std::invalid_argument("--dist-ckpt-strictness: '" + value +
                              "' is not one of raise_unexpected, raise_all, log_unexpected, log_all, assume_ok_unexpected, "
                              "ignore_all (Megatron's return_* values only make sense from Python)");
}

void check_checkpoint_flags(const TrainingArguments& a) {
  const bool loads = !a.load.empty() || !a.lora_load.empty();
  require(a.save_interval >= 0, "--save-interval must be >= 0 (0: only at the end of training)");
  require(a.save_interval == 0 || !a.save.empty(), "--save-interval needs --save");
  require(!a.async_save || !a.save.empty(), "--async-save needs --save");
  require(a.ckpt_step >= -1, "--ckpt-step must be an iteration number");
  require(a.ckpt_step < 0 || loads, "--ckpt-step needs --load or --lora-load");
  require(!a.finetune || loads, "--finetune needs --load or --lora-load");
  require(!a.exit_on_missing_checkpoint || loads, "--exit-on-missing-checkpoint needs --load or --lora-load");
  require(!a.use_checkpoint_args || !a.load.empty(), "--use-checkpoint-args needs --load");
  require(a.unexpected_keys == UnexpectedKeys::kRaise || a.finetune,
          "--dist-ckpt-strictness " + a.dist_ckpt_strictness +
              " needs --finetune: a resumed run loads exactly the model it saved");
  require(!a.no_initialization || !a.load.empty() || !a.init_from_hf_path.empty(),
          "--no-initialization needs --load or --init-from-hf-path (the weights would be uninitialized memory)");
}

void read_checkpoint_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.save = r["save"].as<std::string>();
  a.save_interval = flag_number<int64_t>(r, "save-interval");
  a.load = r["load"].as<std::string>();
  a.init_from_hf_path = r["init-from-hf-path"].as<std::string>();
  a.ckpt_step = flag_number<int64_t>(r, "ckpt-step");
  a.ckpt_format = checkpoint::CheckpointFormat::named(r["ckpt-format"].as<std::string>());
  a.no_save_optim = r["no-save-optim"].as<bool>();
  a.no_load_optim = r["no-load-optim"].as<bool>();
  a.no_load_rng = r["no-load-rng"].as<bool>();
  a.no_save_rng = r["no-save-rng"].as<bool>();
  a.exit_on_missing_checkpoint = r["exit-on-missing-checkpoint"].as<bool>();
  a.use_checkpoint_args = r["use-checkpoint-args"].as<bool>();
  a.finetune = r["finetune"].as<bool>();
  a.dist_ckpt_strictness = r["dist-ckpt-strictness"].as<std::string>();
  a.unexpected_keys = unexpected_keys_policy(a.dist_ckpt_strictness);
  a.async_save = r["async-save"].as<bool>();
  a.no_initialization = r["no-initialization"].as<bool>();
  check_checkpoint_flags(a);
}

}  // namespace

FlagSection checkpoint_section() { return {"checkpointing", declare_checkpoint_flags, read_checkpoint_flags}; }

}  // namespace megacpp::settings
