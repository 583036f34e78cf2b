#include "runtime/memory_estimate.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include <c10/util/Exception.h>
#include <torch/torch.h>

#include "models/registry.h"
#include "parallel/forward_context.h"

namespace megacpp::runtime {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", bytes / kGiB);
  return text;
}

// A "Name: N kB" line of /proc/meminfo, in bytes.
std::optional<double> meminfo_bytes(const std::string& name) {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(name.size() + 1));
    double kb = 0;
    if (fields >> kb) return kb * 1024.0;
  }
  return std::nullopt;
}

// The first number in `path` (cgroup v2 files; "max" reads as none).
std::optional<double> file_number(const std::string& path) {
  std::ifstream in(path);
  double value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

double virtual_size_bytes() {
  std::ifstream in("/proc/self/statm");
  double pages = 0;
  in >> pages;
  return pages * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

void take_lower(std::optional<MemoryLimit>& least, double bytes, const std::string& source) {
  if (!least || bytes < least->bytes) least = MemoryLimit{std::max(bytes, 0.0), source};
}

}  // namespace

double MemoryNeed::bytes() const {
  const double frozen = static_cast<double>(parameters - trained_parameters);
  const double held = (4.0 * frozen + 16.0 * static_cast<double>(trained_parameters)) / shards;
  return std::max(held, built_whole ? 4.0 * static_cast<double>(parameters) : 0.0);
}

std::string MemoryNeed::describe() const {
  std::string text = gib(bytes()) + " (" + std::to_string(parameters) + " parameters: ";
  const bool whole = built_whole && 4.0 * static_cast<double>(parameters) >= bytes();
  if (whole) {
    text += "the whole model in fp32 while it is built, before --use-torch-fsdp2 shards it; "
            "--init-model-with-meta-device builds each rank's shards only";
  } else {
    text += trained_parameters > 0 ? "fp32 weights, gradients and AdamW's two moments, 16 B each"
                                   : "fp32 weights, 4 B each, at the least (some may be frozen)";
    if (shards > 1) text += ", divided among the " + std::to_string(shards) + " ranks that shard them";
  }
  return text + "; activations come on top)";
}

MemoryNeed estimate_memory_need(const settings::JobConfig& job) {
  const settings::TrainingArguments& args = job.args;
  MemoryNeed need;
  const auto counted = models::create_model(*args.model, torch::TensorOptions().dtype(torch::kFloat).device(c10::kMeta));
  std::unordered_set<const c10::TensorImpl*> seen;  // a tied embedding once
  for (const auto& p : counted->parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) need.parameters += p.numel();
  }
  const bool may_freeze = args.lora.rank > 0 || !job.fsdp.freeze_module_prefix.empty();  // the flag's and the YAML's
  need.trained_parameters = may_freeze ? 0 : need.parameters;
  need.shards = args.use_torch_fsdp2 ? job.dims.dp_shard * job.dims.cp : 1;
  need.built_whole = !args.init_model_with_meta_device;
  return need;
}

std::string model_size_flags(const settings::TrainingArguments& args) {
  std::string flags;
  for (const char* flag : {"num-layers", "hidden-size", "ffn-hidden-size", "num-experts", "moe-ffn-hidden-size"}) {
    const auto value = args.flag_values.find(flag);
    if (value == args.flag_values.end() || value->second.empty() || value->second == "None") continue;
    flags += std::string("--") + flag + " " + value->second + ", ";
  }
  return flags + "a vocabulary of " + std::to_string(args.tokenizer_vocab_size) + " tokens";
}

std::optional<MemoryLimit> host_memory_limit() {
  const char* local_world = std::getenv("LOCAL_WORLD_SIZE");
  const int ranks_on_host = local_world != nullptr ? std::max(1, std::atoi(local_world)) : 1;
  std::optional<MemoryLimit> least;
  const std::string shared = ranks_on_host > 1 ? " shared by the " + std::to_string(ranks_on_host) + " ranks on this host" : "";
  if (auto available = meminfo_bytes("MemAvailable")) {
    take_lower(least, *available / ranks_on_host, "MemAvailable " + gib(*available) + shared);
  }
  const auto cgroup_max = file_number("/sys/fs/cgroup/memory.max");
  const auto cgroup_used = file_number("/sys/fs/cgroup/memory.current");
  if (cgroup_max && cgroup_used) {
    take_lower(least, (*cgroup_max - *cgroup_used) / ranks_on_host,
               "the cgroup's memory.max " + gib(*cgroup_max) + ", " + gib(*cgroup_used) + " in use" + shared);
  }
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const double used = virtual_size_bytes();
    take_lower(least, static_cast<double>(limit.rlim_cur) - used,
               "ulimit -v " + gib(static_cast<double>(limit.rlim_cur)) + ", " + gib(used) + " of it taken already");
  }
  return least;
}

void refuse_what_cannot_fit(const MemoryNeed& need, const MemoryLimit& limit, const std::string& size_flags) {
  if (need.bytes() <= limit.bytes) return;
  throw std::invalid_argument("the model cannot fit in this rank's memory: it needs at least " + need.describe() + ", and this rank has " +
                              gib(limit.bytes) + " (" + limit.source + "). Its size comes from " + size_flags +
                              ": make it smaller, or shard it over more ranks with --use-torch-fsdp2");
}

void with_memory_context(const std::function<void()>& body, const std::function<std::string()>& phase, const MemoryNeed& need) {
  const auto out_of_memory = [&](const std::string& what) {
    return std::runtime_error("out of memory in '" + phase() + "': " + what + "\n(the parameters, gradients and optimizer state " +
                              "of this rank alone take at least " + need.describe() + ")");
  };
  try {
    body();
  } catch (const parallel::ModuleOutOfMemory& e) {  // Note [Out of memory in a forward]: names the module
    throw out_of_memory(e.what());
  } catch (const std::bad_alloc& e) {
    throw out_of_memory(std::string("std::bad_alloc: ") + e.what());
  } catch (const c10::Error& e) {
    if (!parallel::is_allocation_failure(e.what_without_backtrace())) throw;
    throw out_of_memory(e.what_without_backtrace());
  }
}

}  // namespace megacpp::runtime
