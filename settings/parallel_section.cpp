// The parallel section (Note [Flag sections]): FSDP2 and its YAML, meta-device init, the
// collectives' timeout, context parallelism (checked with the YAML's ulysses_size in
// settings/parallelism.cpp), activation recompute and the device cache. Reads after the training
// section: --bf16 / --fp16 turn FSDP2 on.
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "megacpp/errors.h"
#include "settings/flag_section.h"

namespace megacpp::settings {
namespace {

void declare_parallel_flags(cxxopts::Options& o) {
  o.add_options("parallel")
      ("use-torch-fsdp2", "shard parameters, gradients and optimizer state with FSDP2")
      ("fsdp2-config-path", "fsdp2_config.yaml", cxxopts::value<std::string>()->default_value(""))
      ("init-model-with-meta-device", "build the model without memory, allocate only local shards")
      ("distributed-timeout-minutes", "timeout of rendezvous and collectives", cxxopts::value<std::string>()->default_value("10"))
      ("context-parallel-size", "split each sequence over this many consecutive ranks (Ulysses; ROLL's ulysses_size)",
       cxxopts::value<std::string>()->default_value("1"))
      ("tensor-model-parallel-size", "split each layer's weights over this many consecutive ranks (Megatron's tensor "
       "parallelism, beside FSDP2)", cxxopts::value<std::string>()->default_value("1"))
      ("context-parallel-algo", "ulysses_cp_algo (DeepSpeed-Ulysses: attention trades the sequence split for a head split)",
       cxxopts::value<std::string>()->default_value("ulysses_cp_algo"))
      ("recompute-granularity", "full: recompute whole layers in backward (with --recompute-method); selective: each "
       "layer's core attention", cxxopts::value<std::string>()->default_value(""))
      ("recompute-activations", "Megatron's shorthand for --recompute-granularity selective")
      ("recompute-method", "uniform: every layer; block: the first --recompute-num-layers", cxxopts::value<std::string>()->default_value(""))
      ("recompute-num-layers", "layers recomputed with --recompute-method block", cxxopts::value<std::string>()->default_value("0"))
      ("empty-unused-memory-level", "1 or 2: return the device's cached memory after each iteration (0: keep it)",
       cxxopts::value<std::string>()->default_value("0"));
}

// Megatron's recompute: whole layers (full), uniformly (every layer) or the first N (block),
// or each layer's core attention only (selective, which takes no method).
void check_recompute(const TrainingArguments& a) {
  if (a.recompute_granularity.empty()) {
    require(a.recompute_method.empty() && a.recompute_num_layers == 0,
            "--recompute-method and --recompute-num-layers need --recompute-granularity full");
    return;
  }
  require(a.use_torch_fsdp2, "--recompute-granularity needs --use-torch-fsdp2 (FSDP2Mixin applies the recompute)");
  require(a.recompute_granularity == "full" || a.recompute_granularity == "selective",
          "--recompute-granularity " + a.recompute_granularity + ": expected full or selective");
  if (a.recompute_granularity == "selective") {
    require(a.recompute_method.empty() && a.recompute_num_layers == 0,
            "--recompute-method and --recompute-num-layers are for --recompute-granularity full (selective "
            "recomputes every layer's core attention; Megatron refuses a method with it too)");
    return;
  }
  require(a.recompute_method == "uniform" || a.recompute_method == "block",
          "--recompute-granularity full needs --recompute-method uniform or block (got '" + a.recompute_method + "')");
  require(a.recompute_num_layers > 0, "--recompute-granularity full needs --recompute-num-layers >= 1");
}

constexpr int kMaxTimeoutMinutes = 100 * 365 * 24 * 60;

void check_parallel_flags(const TrainingArguments& a) {
  check_recompute(a);  // --context-parallel-size: with the YAML's ulysses_size, settings/parallelism.cpp
  require(a.empty_unused_memory_level >= 0 && a.empty_unused_memory_level <= 2, "--empty-unused-memory-level must be 0, 1 or 2");
  require(a.distributed_timeout_minutes > 0, "--distributed-timeout-minutes must be positive");
  std::ostringstream minutes;
  minutes << std::setprecision(15) << a.distributed_timeout_minutes;
  // A timeout of 0 ms would be libtorch's default instead.
  require(a.distributed_timeout_minutes * 60 >= 1,
          "--distributed-timeout-minutes " + minutes.str() + ": at least one second (1/60 of a minute)");
  // Gloo's deadlines are nanoseconds of the steady clock: past ~292 years they wrap around and
  // every wait times out at once.
  require(a.distributed_timeout_minutes <= kMaxTimeoutMinutes,
          "--distributed-timeout-minutes " + minutes.str() + ": at most " + std::to_string(kMaxTimeoutMinutes) +
              " (100 years; libtorch's deadlines overflow past ~292)");
  require(a.fsdp2_config_path.empty() || a.use_torch_fsdp2, "--fsdp2-config-path needs --use-torch-fsdp2");
  require(!a.init_model_with_meta_device || a.use_torch_fsdp2, "--init-model-with-meta-device needs --use-torch-fsdp2");
  require(a.tensor_model_parallel_size >= 1, "--tensor-model-parallel-size must be >= 1");
  require(!a.grad_reduce_in_bf16 || a.use_torch_fsdp2, "--grad-reduce-in-bf16 needs --use-torch-fsdp2 (FSDP2 reduces the gradients)");
}

void read_parallel_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  // Megatron's sharded optimizer is FSDP2's (megatron_flags.cpp says so in the log).
  a.use_torch_fsdp2 = r["use-torch-fsdp2"].as<bool>() || r.count("use-distributed-optimizer") > 0;
  if (!a.use_torch_fsdp2 && (a.bf16 || a.fp16)) {
    a.use_torch_fsdp2 = true;
    a.notes.push_back(std::string(a.bf16 ? "--bf16" : "--fp16") +
                      " without --use-torch-fsdp2: megacpp's mixed precision is FSDP2's (fp32 masters, sharded, and " +
                      (a.bf16 ? "bf16" : "fp16") +
                      " compute), as Megatron's mixed-precision optimizer keeps fp32 main weights; FSDP2 is turned on: the "
                      "same updates, less memory per rank");
  }
  a.fsdp2_config_path = r["fsdp2-config-path"].as<std::string>();
  a.init_model_with_meta_device = r["init-model-with-meta-device"].as<bool>();
  a.distributed_timeout_minutes = flag_number<double>(r, "distributed-timeout-minutes");
  a.context_parallel_size = flag_number<int>(r, "context-parallel-size");
  a.context_parallel_algo = r["context-parallel-algo"].as<std::string>();
  a.tensor_model_parallel_size = flag_number<int>(r, "tensor-model-parallel-size");
  // Megatron turns sequence parallelism off at TP size 1 (no sequence to split); so does megacpp.
  a.sequence_parallel = a.tensor_model_parallel_size > 1 && r.count("sequence-parallel") > 0;
  a.recompute_granularity = r["recompute-granularity"].as<std::string>();
  if (r["recompute-activations"].as<bool>()) {  // Megatron: recompute_activations sets the granularity
    if (!a.recompute_granularity.empty() && a.recompute_granularity != "selective") {
      throw std::invalid_argument("--recompute-activations (selective) contradicts --recompute-granularity " + a.recompute_granularity);
    }
    a.recompute_granularity = "selective";
  }
  a.recompute_method = r["recompute-method"].as<std::string>();
  a.recompute_num_layers = flag_number<int64_t>(r, "recompute-num-layers");
  a.empty_unused_memory_level = flag_number<int>(r, "empty-unused-memory-level");
  if (a.recompute_method == "uniform" && a.recompute_num_layers > 1) {
    a.notes.push_back("--recompute-method uniform --recompute-num-layers " + std::to_string(a.recompute_num_layers) +
                      ": megacpp recomputes each layer on its own (Megatron checkpoints that many layers together): the "
                      "same computation, with every layer's input kept");
  }
  check_parallel_flags(a);
}

}  // namespace

FlagSection parallel_section() { return {"parallel", declare_parallel_flags, read_parallel_flags}; }

}  // namespace megacpp::settings
