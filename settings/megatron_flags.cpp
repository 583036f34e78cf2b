#include "settings/megatron_flags.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace megacpp::settings {
namespace {

// A Megatron flag megacpp accepts because it describes what megacpp computes anyway.
struct CompatibleFlag {
  const char* name;      // without "--"
  const char* accepted;  // nullptr: a switch; "*": any value; else the values, '|'-separated
  const char* why;       // what megacpp does, for --help, docs/cli.md and refusals
  const char* note;      // said once in the log when given, or nullptr
};

const CompatibleFlag kCompatible[] = {
    {"use-mcore-models", nullptr, "megacpp's models are its own (Megatron Core's structure)", nullptr},
    {"transformer-impl", "local|transformer_engine", "megacpp computes every layer itself", nullptr},
    {"rotary-percent", "1.0", "rotary embeddings cover the whole head dimension", nullptr},
    {"group-query-attention", nullptr, "query groups are set by --num-query-groups", nullptr},
    {"pipeline-model-parallel-size", "1", "megacpp has no pipeline parallelism; FSDP2 shards instead (--use-torch-fsdp2)", nullptr},
    {"spec", "mindspeed_llm.tasks.models.spec.qwen3_spec layer_spec",
     "the llama family computes Qwen3's layer (its QK norm with --qk-layernorm, as MindSpeed's scripts give it)", nullptr},
    {"expert-model-parallel-size", "1", "megacpp has no expert parallelism", nullptr},
    {"moe-grouped-gemm", nullptr, "megacpp groups each expert's tokens and runs each expert once over them", nullptr},
    {"moe-token-dispatcher-type", "allgather|alltoall|alltoall_seq", "without expert parallelism every rank holds every expert",
     nullptr},
    {"moe-permutation-async-comm", nullptr, "MindSpeed's overlap of the expert-parallel token exchange; megacpp has no expert "
     "parallelism, so no exchange", nullptr},
    {"sequence-parallel", nullptr, "with tensor parallel size 1 there is no sequence to split (with a larger "
     "--tensor-model-parallel-size: Megatron's sequence parallelism, the norms on slices of each sequence)", nullptr},
    {"use-cp-send-recv-overlap", nullptr, "ring attention's (megatron_cp_algo's) overlap of its block exchange; megacpp's "
     "context parallelism is Ulysses (--context-parallel-algo megatron_cp_algo is refused with a context parallel size above 1), "
     "which exchanges no ring blocks", nullptr},
    {"use-fused-ring-attention-update", nullptr, "MindSpeed's fused update of ring attention's partial results; megacpp has "
     "no ring attention (see --use-cp-send-recv-overlap)", nullptr},
    {"distributed-backend", "nccl|gloo", "megacpp uses NCCL on GPUs and Gloo on CPUs", nullptr},
    {"use-distributed-optimizer", nullptr, "FSDP2 shards the optimizer state; without --use-torch-fsdp2 it turns FSDP2 on",
     "--use-distributed-optimizer: FSDP2 already shards the optimizer state over the data-parallel ranks (MindSpeed asks "
     "FSDP2 users to leave it off); given without --use-torch-fsdp2 it turns FSDP2 on, which shards the parameters and "
     "gradients too: the same updates"},
    {"no-masked-softmax-fusion", nullptr, "megacpp has no fused masked softmax", nullptr},
    {"stage", "sft", "MindSpeed-LLM's supervised fine-tuning is the language-model loss megacpp trains, on the assistants' "
     "tokens with --is-instruction-dataset (its other stages, dpo, rm, ..., are not implemented)", nullptr},
    {"handler-name", "GeneralPretrainHandler",
     "--data-path's datasets are token data megacpp-preprocess wrote (conversations: megacpp-preprocess --handler-name "
     "AlpacaStyleInstructionHandler or SharegptStyleInstructionHandler, then --is-instruction-dataset)", nullptr},
    {"lora-fusion", nullptr, "MindSpeed-LLM's fused LoRA kernel changes only the speed; libtorch computes the adapters", nullptr},
    {"no-gradient-accumulation-fusion", nullptr, "megacpp has no fused gradient accumulation", nullptr},
    {"no-bias-dropout-fusion", nullptr, "megacpp has no fused bias-dropout", nullptr},
    {"use-fused-rmsnorm", nullptr, "megacpp fuses RMSNorm on the CPU (off only with --no-kernel-fusion)", nullptr},
    {"use-fused-rotary-pos-emb", nullptr, "megacpp fuses the rotary embedding on the CPU (off with --no-rope-fusion)", nullptr},
    {"use-fused-swiglu", nullptr, "megacpp fuses SwiGLU on the CPU (off with --no-bias-swiglu-fusion)", nullptr},
    {"use-flash-attn", nullptr, "megacpp picks its attention kernel: SDPA (flash attention) on libtorch 2.x, its own blocked "
     "attention with an online softmax on 1.13", nullptr},
    {"attention-backend", "auto|flash|fused|unfused|local",
     "every choice computes exact attention; megacpp picks the kernel (SDPA on libtorch 2.x, its own blocked attention on 1.13)", nullptr},
    {"cross-entropy-loss-fusion", nullptr, "megacpp fuses the cross-entropy on the CPU (off only with --no-kernel-fusion)", nullptr},
    {"overlap-grad-reduce", nullptr, "FSDP2 reduce-scatters each group's gradients as its backward ends", nullptr},
    {"overlap-param-gather", nullptr, "FSDP2 prefetches gathers (num_to_forward_prefetch in fsdp2_config.yaml)", nullptr},
    {"no-async-tensor-model-parallel-allreduce", nullptr, "megacpp's tensor-parallel all-reduces are not overlapped "
     "with the weight gradients' computation", nullptr},
    {"manual-gc", nullptr, "C++ has no garbage collector to pause", nullptr},
    {"manual-gc-interval", "*", "C++ has no garbage collector to pause", nullptr},
    {"log-throughput", nullptr, "every iteration line shows tokens per second and TFLOP/s", nullptr},
    {"log-timers-to-tensorboard", nullptr, "the iteration time is in every iteration line", nullptr},
    {"log-validation-ppl-to-tensorboard", nullptr, "TensorBoard always gets the validation perplexity", nullptr},
    {"log-memory-to-tensorboard", nullptr, "TensorBoard always gets the memory scalars", nullptr},
    {"timing-log-level", "*", "the iteration time is in every iteration line", nullptr},
    {"tensorboard-queue-size", "*", "megacpp writes TensorBoard events at every log line", nullptr},
    {"attention-softmax-in-fp32", nullptr, "the attention softmax always runs in fp32 (or wider)", nullptr},
    {"optimizer", "adam|adamw", "megacpp's optimizer is AdamW, which is what Megatron's adam is (decoupled weight decay)", nullptr},
    {"rerun-mode", "disabled", "megacpp has no re-run state machine; its NaN/Inf guard stops the run instead", nullptr},
    {"no-create-attention-mask-in-dataloader", nullptr, "megacpp builds no mask: attention is causal in the kernel", nullptr},
    {"no-mmap-bin-files", nullptr, "megacpp maps the .bin files; the samples are the same", nullptr},
    {"tiktoken-pattern", "*", "read only by Megatron's TikTokenizer, which megacpp does not have", nullptr},
    {"tokenizer-not-use-fast", nullptr, "megacpp has one implementation of each tokenizer (the same ids)", nullptr},
    {"no-shared-storage", nullptr, "each rank writes only its own checkpoint file", nullptr},
    {"use-pytorch-profiler", nullptr, "--profile always traces with libtorch's profiler", nullptr},
};

// A Megatron flag (or family of flags, by prefix) megacpp does not support, and why.
struct RefusedFlag {
  const char* name;  // without "--"; a trailing '*' matches a prefix
  const char* why;
};

const RefusedFlag kRefused[] = {
    {"fp8*", "megacpp has no fp8 (it needs Transformer Engine); use --bf16"},
    {"moe-*", "megacpp's mixture of experts reads --num-experts, --moe-router-topk, --moe-ffn-hidden-size, "
              "--moe-layer-freq, --first-k-dense-replace, --moe-router-pre-softmax, --moe-aux-loss-coeff and "
              "--moe-router-load-balancing-type only"},
    {"use-legacy-models", "megacpp has only its own models (--use-mcore-models)"},
    {"wandb-*", "megacpp logs to TensorBoard only (--tensorboard-dir)"},
    {"virtual-pipeline-model-parallel-size", "megacpp has no pipeline parallelism"},
    {"num-layers-per-virtual-pipeline-stage", "megacpp has no pipeline parallelism"},
    // MindSpeed's Ascend NPU kernels and hardware switches.
    {"use-ascend-*", "an Ascend NPU kernel (MindSpeed); megacpp runs on CPUs and NVIDIA GPUs"},
    {"use-mc2", "an Ascend NPU kernel (MindSpeed's MC2); megacpp runs on CPUs and NVIDIA GPUs"},
    {"coc-*", "an Ascend NPU kernel (MindSpeed's CoC); megacpp runs on CPUs and NVIDIA GPUs"},
    {"hccl-*", "Ascend's collective library (HCCL); megacpp uses NCCL on GPUs and Gloo on CPUs"},
    {"npu-*", "an Ascend NPU setting (MindSpeed); megacpp runs on CPUs and NVIDIA GPUs"},
    {"use-deter-comp", "an Ascend NPU setting (MindSpeed's deterministic kernels); megacpp runs on CPUs and NVIDIA "
                       "GPUs"},
    {"jit-compile", "an Ascend NPU setting (MindSpeed's operator JIT); megacpp runs on CPUs and NVIDIA GPUs"},
    {"use-fusion-attn-v2", "an Ascend NPU kernel (MindSpeed's fusion attention); megacpp runs on CPUs and NVIDIA GPUs"},
    // MindSpeed's memory and overlap machinery.
    {"reuse-fp32-param", "MindSpeed's distributed-optimizer memory trick; FSDP2 shards the fp32 masters instead"},
    {"swap-*", "MindSpeed's host-memory swapping; megacpp offloads FSDP2's shards instead (offload_to_cpu in "
               "fsdp2_config.yaml)"},
    {"smart-swap", "MindSpeed's host-memory swapping; megacpp offloads FSDP2's shards instead (offload_to_cpu in "
                   "fsdp2_config.yaml)"},
    {"o2-*", "MindSpeed's bf16 optimizer state / gradients; megacpp keeps them fp32 (FSDP2's masters)"},
    {"adaptive-recompute-*", "MindSpeed's adaptive recompute; use --recompute-granularity full with "
                             "--recompute-method"},
    {"recompute-activation-function*", "MindSpeed's partial recompute; megacpp recomputes whole layers "
                                       "(--recompute-granularity full)"},
    {"recompute-norm*", "MindSpeed's partial recompute; megacpp recomputes whole layers (--recompute-granularity "
                        "full)"},
    {"recompute-in-*", "MindSpeed's pipeline-bubble recompute; megacpp has no pipeline parallelism"},
    {"memory-fragmentation", "MindSpeed's NPU memory allocator; megacpp uses libtorch's"},
    {"enable-overlap-*", "MindSpeed's tensor-parallel overlap; megacpp's tensor parallelism does not overlap its "
                         "all-reduces"},
    {"use-nd-matmul", "MindSpeed's ND tensor parallelism; megacpp's tensor parallelism is Megatron's 1-D split "
                      "(--tensor-model-parallel-size)"},
    {"tp-2d", "MindSpeed's 2-D tensor parallelism; megacpp's tensor parallelism is Megatron's 1-D split "
              "(--tensor-model-parallel-size)"},
    {"enable-high-availability", "MindSpeed's high-availability feature; megacpp's fault handling is docs/failures.md"},
    // MindSpeed-LLM's fine-tuning and model flags.
    {"prompt-type-path", "a file of templates for --prompt-type; megacpp's templates are its named ones and the tokenizer "
                         "folder's (megacpp-preprocess --prompt-type)"},
};

bool matches(const std::string& pattern, const std::string& flag) {
  if (!pattern.empty() && pattern.back() == '*') return flag.rfind(pattern.substr(0, pattern.size() - 1), 0) == 0;
  return pattern == flag;
}

// "1" and "1.0" are the same number.
bool same_value(const std::string& accepted, const std::string& given) {
  if (accepted == given) return true;
  char *end_a = nullptr, *end_g = nullptr;
  const double a = std::strtod(accepted.c_str(), &end_a), g = std::strtod(given.c_str(), &end_g);
  return !accepted.empty() && !given.empty() && *end_a == '\0' && *end_g == '\0' && a == g;
}

bool accepts(const CompatibleFlag& flag, const std::string& value) {
  if (std::string(flag.accepted) == "*") return true;
  std::istringstream choices(flag.accepted);
  for (std::string choice; std::getline(choices, choice, '|');) {
    if (same_value(choice, value)) return true;
  }
  return false;
}

}  // namespace

void add_megatron_compatible_flags(cxxopts::Options& options, const std::vector<std::string>& taken) {
  auto group = options.add_options("Megatron flags megacpp accepts as what it does");
  for (const auto& flag : kCompatible) {
    if (std::find(taken.begin(), taken.end(), flag.name) != taken.end()) continue;
    if (flag.accepted == nullptr) {
      group(flag.name, std::string("accepted: ") + flag.why);
    } else {
      const std::string values = std::string(flag.accepted) == "*" ? "any value" : std::string("only ") + flag.accepted;
      group(flag.name, std::string("accepted with ") + values + ": " + flag.why, cxxopts::value<std::string>());
    }
  }
}

std::vector<std::string> megatron_flag_problems(const cxxopts::ParseResult& result, const std::vector<std::string>& taken) {
  std::vector<std::string> problems;
  for (const auto& flag : kCompatible) {
    if (flag.accepted == nullptr || std::find(taken.begin(), taken.end(), flag.name) != taken.end()) continue;
    if (result.count(flag.name) == 0) continue;
    const std::string value = result[flag.name].as<std::string>();
    if (!accepts(flag, value)) {
      problems.push_back("--" + std::string(flag.name) + " " + value + ": not supported (only " + flag.accepted + "): " + flag.why);
    }
  }
  return problems;
}

std::vector<std::string> megatron_flag_notes(const cxxopts::ParseResult& result) {
  std::vector<std::string> notes;
  for (const auto& flag : kCompatible) {
    if (flag.note != nullptr && result.count(flag.name) > 0) notes.push_back(flag.note);
  }
  return notes;
}

bool is_megatron_compatible_flag(const std::string& flag) {
  return std::any_of(std::begin(kCompatible), std::end(kCompatible), [&](const CompatibleFlag& f) { return flag == f.name; });
}

std::string unsupported_flag_reason(const std::string& flag) {
  for (const auto& refused : kRefused) {
    if (matches(refused.name, flag)) return refused.why;
  }
  return "";
}

}  // namespace megacpp::settings
