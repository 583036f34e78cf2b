// Note [Memory estimate]
// A model that cannot fit used to fail deep in libtorch ("DefaultCPUAllocator: can't allocate
// memory", std::bad_alloc) with no flag named. Before anything is allocated, megacpp-train
// counts the model's parameters on the meta device and sets the least this rank must hold
// against the memory it may use:
//   - the parameters in fp32 (4 B each), their gradients (4 B) and AdamW's two moments (8 B),
//     divided among the ranks that shard them; frozen parameters (LoRA, freeze_module_prefix)
//     are counted without gradients or moments, so the figure stays a lower bound;
//   - without --init-model-with-meta-device, the whole model in fp32 while it is built, before
//     it is sharded.
// Activations come on top, so only a figure that is certain to be too much is refused. The
// memory a rank may use is the least of the host's MemAvailable and its cgroup's memory.max
// (each shared by the ranks on this host) and what `ulimit -v` leaves this process. An
// allocation that still fails is reported with the phase the rank was in (with_memory_context).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "settings/job_config.h"

namespace megacpp::runtime {

struct MemoryNeed {
  int64_t parameters = 0;
  int64_t trained_parameters = 0;  // 0 when some may be frozen: the lower bound
  int shards = 1;                  // the ranks one parameter is divided among
  bool built_whole = true;         // the model is materialized whole before it is sharded
  double bytes() const;            // the least this rank holds at once
  std::string describe() const;    // "... GiB (... parameters: ...)"
};

// Counts the model's parameters on the meta device (nothing is allocated).
MemoryNeed estimate_memory_need(const settings::JobConfig& job);
// "--num-layers 48, --hidden-size 8192, ..., a vocabulary of 50304 tokens": what sets the size.
std::string model_size_flags(const settings::TrainingArguments& args);

struct MemoryLimit {
  double bytes = 0;
  std::string source;  // "MemAvailable 7.6 GiB shared by 2 ranks", "ulimit -v 4.0 GiB, 1.3 GiB in use", ...
};

// The memory this process may still take on the host, or nullopt when nothing limits it. The
// host's share is divided among LOCAL_WORLD_SIZE ranks (torchrun's and megacpp-run's variable).
std::optional<MemoryLimit> host_memory_limit();

// Throws std::invalid_argument naming `size_flags` when `need` exceeds `limit`.
void refuse_what_cannot_fit(const MemoryNeed& need, const MemoryLimit& limit, const std::string& size_flags);

// Runs `body`; an allocation that fails in it (std::bad_alloc, libtorch's "can't allocate
// memory" or "out of memory") is rethrown naming `phase()` and the estimate.
void with_memory_context(const std::function<void()>& body, const std::function<std::string()>& phase, const MemoryNeed& need);

}  // namespace megacpp::runtime
