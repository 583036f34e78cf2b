#include "settings/rlvr_config.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "settings/rlvr_reader.h"

namespace megacpp::settings {
namespace rlvr {

std::string emitted(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return out.c_str();
}

std::string Reader::strategy_name(const YAML::Node& strategy_args, const std::string& key) const {
  if (!strategy_args.IsMap() || !strategy_args["strategy_name"]) fail(strategy_args, key, "expected {strategy_name, strategy_config}");
  return text(strategy_args["strategy_name"], key + ".strategy_name");
}

// Megatron's strategy_config keys that megacpp-train reads as the Megatron flags of the same
// names, each value checked there as in a Megatron script (Note [Megatron flags]).
const std::set<std::string>& megatron_strategy_keys() {
  static const std::set<std::string> keys = {
      "tensor_model_parallel_size", "sequence_parallel", "context_parallel_size", "pipeline_model_parallel_size",
      "virtual_pipeline_model_parallel_size", "expert_model_parallel_size", "use_distributed_optimizer", "recompute_granularity",
      "recompute_method", "recompute_num_layers", "use_flash_attn", "overlap_grad_reduce", "overlap_param_gather", "moe_grouped_gemm",
      "moe_token_dispatcher_type"};
  return keys;
}

// actor_train's megatron_train strategy_config: each key as the Megatron flag (true: the switch;
// false and null: not given), expert_tensor_parallel_size 1.
void Reader::megatron_strategy(const YAML::Node& config, const std::string& key) {
  for (const auto& item : config) {
    const std::string name = item.first.Scalar(), ckey = key + "." + name;
    const YAML::Node& v = item.second;
    if (name == "expert_tensor_parallel_size") {
      require(v, ckey, "1", "megacpp has no expert tensor parallelism: experts stay whole on each TP rank");
      continue;
    }
    if (megatron_strategy_keys().count(name) == 0) {
      std::string known;
      for (const auto& k : megatron_strategy_keys()) known += (known.empty() ? "" : ", ") + k;
      unknown(item.first, ckey, known + " and expert_tensor_parallel_size (1)");
    }
    if (v.IsNull()) continue;
    std::string flag_name = name;
    std::replace(flag_name.begin(), flag_name.end(), '_', '-');
    const std::string value = text(v, ckey);
    if (value == "false") continue;
    flag(v, ckey, flag_name, value == "true" ? "" : value);
  }
}

// Beside actor_train's megatron_train, the reference's megatron_infer: megacpp-grpo splits it as
// the actor, so its parallel sizes must be the actor's (absent: 1); its other keys are the
// actor's to give.
void Reader::megatron_reference(const YAML::Node& strategy_args, const std::string& key, const YAML::Node& trained) const {
  const std::string strategy = strategy_name(strategy_args, key);
  if (strategy != "megatron_infer") {
    fail(strategy_args, key + ".strategy_name", "beside actor_train's megatron_train the reference runs megatron_infer, got '" + strategy + "'");
  }
  const YAML::Node config = strategy_args["strategy_config"];
  auto size = [&](const YAML::Node& node, const std::string& name) {
    return node && node[name] && !node[name].IsNull() ? text(node[name], key + ".strategy_config." + name) : std::string("1");
  };
  for (const auto& item : config) {
    const std::string name = item.first.Scalar();
    if (megatron_strategy_keys().count(name) == 0 && name != "expert_tensor_parallel_size") {
      unknown(item.first, key + ".strategy_config." + name, "actor_train's strategy_config keys");
    }
  }
  for (const char* name : {"tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size",
                           "expert_tensor_parallel_size", "context_parallel_size"}) {
    if (size(config, name) != size(trained, name)) {
      fail(config && config[name] ? config[name] : strategy_args, key + ".strategy_config." + name,
           "is " + size(config, name) + ", actor_train's " + size(trained, name) + ": megacpp-grpo splits the reference as the actor");
    }
  }
}

// Megatron's decay style for Hugging Face's lr_scheduler_type (the warmup is warmup_steps').
std::string Reader::decay_style(const YAML::Node& node, const std::string& key) const {
  const std::string type = text(node, key);
  if (type == "constant" || type == "constant_with_warmup") return "constant";
  if (type == "linear" || type == "cosine") return type;
  fail(node, key, "expected constant, constant_with_warmup, linear or cosine (Megatron's decay styles), got '" + type + "'");
}

// actor_train.training_args (Hugging Face's TrainingArguments as ROLL reads them): each mini-batch
// of per_device_train_batch_size x gradient_accumulation_steps (default 1) responses per rank is
// one optimizer step; warmup_steps and lr_scheduler_type count those steps.
void Reader::training_args(const YAML::Node& node, const std::string& key) {
  for (const auto& arg : node) {
    const std::string a = arg.first.Scalar(), akey = key + "." + a;
    if (a == "learning_rate") flag(arg.second, akey, "lr");
    else if (a == "weight_decay") flag(arg.second, akey, "weight-decay");
    else if (a == "per_device_train_batch_size") flag(arg.second, akey, "ppo-micro-batch-size");
    else if (a == "gradient_accumulation_steps") flag(arg.second, akey, "gradient-accumulation-steps");
    else if (a == "max_grad_norm") flag(arg.second, akey, "clip-grad");
    else if (a == "warmup_steps") flag(arg.second, akey, "lr-warmup-iters");
    else if (a == "lr_scheduler_type") flag(arg.second, akey, "lr-decay-style", decay_style(arg.second, akey));
    else unknown(arg.first, akey, "learning_rate, weight_decay, per_device_train_batch_size, gradient_accumulation_steps, "
                                  "max_grad_norm, warmup_steps and lr_scheduler_type");
  }
  if (node["per_device_train_batch_size"] && !node["gradient_accumulation_steps"]) {
    flag(node["per_device_train_batch_size"], key + ".per_device_train_batch_size", "gradient-accumulation-steps", "1");
  }
}

// The run's bookkeeping: its name, logging, tracking and resumption (ROLL's BaseConfig keys).
bool Reader::run_key(const std::string& key, const YAML::Node& v) {
  if (key == "logging_steps") {
    flag(v, key, "log-interval");
  } else if (key == "exp_name") {
    config.experiment = text(v, key);
  } else if (key == "resume_from_checkpoint") {
    if (v.IsNull() || text(v, key) == "false" || text(v, key) == "False") return true;
    flag(v, key, "load");  // a megacpp checkpoint: the run goes on from its iteration
  } else if (key == "track_with") {
    const std::string tracker = text(v, key);
    const YAML::Node kwargs = root["tracker_kwargs"];
    if (tracker == "tensorboard") {
      if (!kwargs.IsMap() || !kwargs["log_dir"] || kwargs.size() != 1) fail(kwargs, "tracker_kwargs", "expected {log_dir: DIR} for tensorboard");
      flag(kwargs["log_dir"], "tracker_kwargs.log_dir", "tensorboard-dir");
    } else if (tracker == "stdout") {
      if (kwargs.IsDefined() && !kwargs.IsNull() && kwargs.size() > 0) fail(kwargs, "tracker_kwargs", "stdout takes none");
    } else {
      fail(v, key, "megacpp-grpo tracks with tensorboard (event files in tracker_kwargs.log_dir) or stdout (its step lines), not '" +
                       tracker + "'");
    }
  } else if (key == "tracker_kwargs") {
    if (!root["track_with"]) fail(v, key, "goes with track_with");
  } else if (key == "hydra") {  // Hydra's launcher: megacpp runs where it is started and writes no .hydra folder
    const YAML::Node run = v["run"];
    const bool plain = v.IsMap() && v.size() == 2 && run.IsMap() && run.size() == 1 && run["dir"] && run["dir"].Scalar() == "." &&
                       v["output_subdir"] && v["output_subdir"].IsNull();
    if (!plain) fail(v, key, "megacpp runs in the directory it is started in and writes no Hydra output: expected {run: {dir: .}, output_subdir: null}");
  } else {
    return false;
  }
  return true;
}

void Reader::top_level() {
  static const std::map<std::string, std::string> as_flags = {
      {"seed", "seed"}, {"max_steps", "train-iters"}, {"save_steps", "save-interval"}, {"eval_steps", "eval-interval"},
      {"rollout_batch_size", "rollout-batch-size"}, {"num_return_sequences_in_group", "num-return-sequences-in-group"},
      {"response_length", "response-length"}, {"pretrain", "init-from-hf-path"}, {"output_dir", "save"}};
  YAML::Node train, infer, ref, prompt_length;
  for (const auto& item : root) {
    const std::string key = item.first.Scalar();
    const YAML::Node& v = item.second;
    if (const auto found = as_flags.find(key); found != as_flags.end()) {
      flag(v, key, found->second);
    } else if (key == "prompt_length") {
      prompt_length = v;
    } else if (algorithm_key(item.first, key, v) || run_key(key, v)) {
      continue;
    } else if (key == "actor_train") {
      train = v;
    } else if (key == "actor_infer") {
      infer = v;
    } else if (key == "reference") {
      ref = v;
    } else {
      unknown(item.first, key, "seed, max_steps, save_steps, eval_steps, rollout_batch_size, num_return_sequences_in_group, "
                               "prompt_length, response_length, pretrain, output_dir, resume_from_checkpoint, logging_steps, "
                               "track_with, tracker_kwargs, exp_name, hydra, actor_train, actor_infer, reference and the algorithm's "
                               "keys listed in docs/cli.md");
    }
  }
  finish_algorithm();
  if (!prompt_length.IsNull() && root["response_length"]) {
    const int64_t context = std::stoll(text(prompt_length, "prompt_length")) + std::stoll(text(root["response_length"], "response_length"));
    flag(prompt_length, "prompt_length", "seq-length", std::to_string(context));
  }
  std::vector<int> trainers;
  if (train) actor_train(train, trainers);
  if (infer) actor_infer(infer, trainers);
  if (ref) reference(ref, trainers);
}

void Reader::actor_train(const YAML::Node& node, std::vector<int>& mapping) {
  YAML::Node document;
  bool megatron = false;
  for (const auto& item : node) {
    const std::string key = "actor_train." + item.first.Scalar(), name = item.first.Scalar();
    const YAML::Node& v = item.second;
    if (name == "model_args") {
      document["model_args"] = v;
    } else if (name == "strategy_args") {
      const std::string strategy = strategy_name(v, key);
      if (strategy == "megatron_train") {
        megatron_strategy(v["strategy_config"], key + ".strategy_config");
        megatron = true;
        continue;
      }
      if (strategy != "fsdp2_train") {
        fail(v, key + ".strategy_name", "megacpp trains with fsdp2_train or megatron_train, got '" + strategy + "'");
      }
      document["strategy_args"] = v;
      flag(v, key, "use-torch-fsdp2", "");
    } else if (name == "training_args") {
      training_args(v, key);
    } else if (name == "device_mapping") {
      mapping = ranks(v, key);
      for (size_t r = 0; r < mapping.size(); ++r) {
        if (mapping[r] != static_cast<int>(r)) fail(v, key, "the trainer takes the first ranks of the job, 0 to N - 1 in order");
      }
      config.trainer_ranks = static_cast<int>(mapping.size());
    } else if (name == "infer_batch_size") {
      flag(v, key, "infer-batch-size");
    } else {
      unknown(item.first, key, "model_args, strategy_args, training_args, device_mapping and infer_batch_size");
    }
  }
  if (megatron && document["model_args"]) {  // read as beside an FSDP2 strategy that sets nothing
    document["strategy_args"]["strategy_name"] = "fsdp2_train";
    document["strategy_args"]["strategy_config"] = YAML::Node(YAML::NodeType::Map);
  }
  if (document["strategy_args"]) config.train_strategy_yaml = emitted(document);
}

void Reader::actor_infer(const YAML::Node& node, const std::vector<int>& trainers) {
  for (const auto& item : node) {
    const std::string key = "actor_infer." + item.first.Scalar(), name = item.first.Scalar();
    const YAML::Node& v = item.second;
    if (name == "generating_args") {
      for (const auto& arg : v) {
        const std::string a = arg.first.Scalar(), akey = key + "." + a;
        if (a == "max_new_tokens") flag(arg.second, akey, "response-length");
        else if (a == "top_p") flag(arg.second, akey, "top-p");
        else if (a == "top_k") flag(arg.second, akey, "top-k");
        else if (a == "temperature") flag(arg.second, akey, "temperature");
        else if (a == "num_return_sequences") flag(arg.second, akey, "num-return-sequences-in-group");
        else if (a == "num_beams") require(arg.second, akey, "1", "responses are sampled, not searched");
        else unknown(arg.first, akey, "max_new_tokens, top_p, top_k, temperature, num_return_sequences and num_beams (1)");
      }
    } else if (name == "strategy_args") {
      const std::string strategy = strategy_name(v, key);
      if (strategy != "vllm" && strategy != "sglang" && strategy != "hf_infer") {
        fail(v, key + ".strategy_name", "expected a generation strategy (vllm, sglang or hf_infer), got '" + strategy + "'");
      }
      const YAML::Node settings = v["strategy_config"];
      if (settings && !settings.IsNull() && settings.size() > 0) {
        fail(settings, key + ".strategy_config", "megacpp generates with its own engine (a KV cache, the sampling of generating_args), "
                                                 "which takes none of " + strategy + "'s settings; remove strategy_config");
      }
    } else if (name == "device_mapping") {
      const std::vector<int> mapping = ranks(v, key);
      if (mapping == trainers) continue;  // colocated
      for (size_t r = 0; r < mapping.size(); ++r) {
        if (mapping[r] != static_cast<int>(trainers.size() + r)) {
          fail(v, key, "the rollout shares actor_train's ranks (colocated) or takes the ranks right after them, in order");
        }
      }
      flag(v, key, "rollout-ranks", std::to_string(mapping.size()));
    } else if (name == "num_gpus_per_worker") {
      require(v, key, "1", "each rollout worker is one rank");
    } else {
      unknown(item.first, key, "generating_args, strategy_args, device_mapping and num_gpus_per_worker (1); the rollout's model is the actor's");
    }
  }
}

void Reader::reference(const YAML::Node& node, const std::vector<int>& trainers) {
  const YAML::Node train = root["actor_train"];
  for (const auto& item : node) {
    const std::string key = "reference." + item.first.Scalar(), name = item.first.Scalar();
    const YAML::Node& v = item.second;
    if (name == "strategy_args") {
      const std::string strategy = strategy_name(v, key);
      const YAML::Node trained = train["strategy_args"];
      if (trained && trained["strategy_name"] && trained["strategy_name"].Scalar() == "megatron_train") {
        megatron_reference(v, key, trained["strategy_config"]);
        continue;
      }
      if (strategy != "fsdp2_infer") fail(v, key + ".strategy_name", "the reference runs fsdp2_infer, got '" + strategy + "'");
      if (emitted(v["strategy_config"]) != emitted(trained["strategy_config"])) {
        fail(v, key + ".strategy_config", "differs from actor_train's: megacpp-grpo shards the reference as the actor, on its ranks");
      }
    } else if (name == "model_args") {
      if (emitted(v) != emitted(train["model_args"])) fail(v, key, "differs from actor_train's: the reference is the actor's model");
    } else if (name == "device_mapping") {
      if (ranks(v, key) != trainers) fail(v, key, "the reference shares actor_train's ranks");
    } else if (name == "infer_batch_size") {
      flag(v, key, "infer-batch-size");
    } else {
      unknown(item.first, key, "strategy_args, model_args, device_mapping and infer_batch_size");
    }
  }
}

}  // namespace rlvr

RlvrConfig read_rlvr_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--rl-config-path " + path + ": cannot be read");
  rlvr::Reader reader{path, {}, {}};
  try {
    reader.root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("--rl-config-path " + path + ": not valid YAML: " + e.what());
  }
  if (!reader.root.IsMap()) throw std::invalid_argument("--rl-config-path " + path + ": expected a mapping of ROLL's RLVR keys");
  try {
    reader.top_level();
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("--rl-config-path " + path + ": " + e.what());
  } catch (const std::logic_error& e) {  // std::stoi of a value that is no number
    if (dynamic_cast<const std::invalid_argument*>(&e) && std::string(e.what()).rfind(path, 0) == 0) throw;
    throw std::invalid_argument("--rl-config-path " + path + ": a number that is not one (" + e.what() + ")");
  }
  reader.config.source = path + " (actor_train)";
  return reader.config;
}

}  // namespace megacpp::settings
