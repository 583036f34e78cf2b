// Note [Weight sync over a process group]
// When the rollout runs on ranks of its own (rl/rollout_groups.h), the trainer sends its weights
// the way verl's FSDP engine feeds a separate rollout engine. Once, at the handshake, trainer
// rank 0 broadcasts every parameter's name, dtype and full shape over the sync group; each worker
// checks them against its model, and a refusal (a missing parameter, another shape) reaches every
// rank of the job naming the worker and the parameter, before any weight moves. Then at each sync
// the trainer ranks gather each full parameter from its FSDP2 shards, one at a time (collective
// over its shard group: no rank ever holds the whole model), rank 0 packs its bytes into a buffer
// of at most `chunk_bytes` and broadcasts the buffer whenever it is full, and the workers unpack
// each chunk into their parameters by name (vLLM's load_weights([(name, tensor)])), casting to
// their dtype. Each parameter starts 8-byte aligned in the stream and chunks are multiples of 8
// bytes, so no element straddles two chunks. The sync ends with a one-value all-reduce over the
// sync group: the trainer returns once every worker holds the new weights, and a worker that died
// is found in this sync, not the next. The sender holds its shard, one gathered parameter (with
// the all-gather's buffers while it runs) and one chunk.
//
// A failure on the sync group (a worker killed, the group's timeout) stops rank 0's sends; it
// still takes its part in the remaining gathers so that the trainer ranks stay in step, then
// tells them, and every trainer rank throws the same error, naming the worker ranks and the
// chunk and parameter where it failed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "rl/rollout_groups.h"
#include "rl/weight_sync.h"

namespace torch::nn {
class Module;
}

namespace megacpp::rl {

// Called with (chunk, chunks) as each chunk of a sync arrives at a worker (chunk from 0).
using ChunkObserver = std::function<void(int64_t, int64_t)>;

struct WeightBroadcastOptions {
  int64_t chunk_bytes = int64_t{512} << 20;  // rounded down to a multiple of 8
  c10::Device device{c10::kCPU};             // where the chunks live (the sync group's: CUDA for NCCL)
};

// One parameter as the stream carries it.
struct SentParameter {
  std::string name;
  c10::ScalarType dtype = c10::kFloat;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // of its first byte in the stream
  int64_t bytes() const;
};

// The trainer's side: every trainer rank constructs one and calls send() together.
class WeightSender {
 public:
  // The handshake, collective over every rank of the job (the workers construct their
  // WeightReceiver at the same point). Throws std::invalid_argument with a worker's refusal.
  WeightSender(torch::nn::Module& trainer, const RolloutGroups& groups, const WeightBroadcastOptions& options = {});
  // Collective over the trainer ranks and the sync group. Throws std::runtime_error on every
  // trainer rank when a worker could not be reached.
  WeightSyncStats send();

 private:
  torch::nn::Module& trainer_;
  RolloutGroups groups_;
  WeightBroadcastOptions options_;
  std::vector<SentParameter> stream_;
};

// A rollout worker's side.
class WeightReceiver {
 public:
  // The handshake (see WeightSender). Throws std::invalid_argument naming this or another
  // worker's first mismatched parameter.
  WeightReceiver(torch::nn::Module& rollout, const RolloutGroups& groups, const WeightBroadcastOptions& options = {});
  // Collective over the sync group: loads the trainer's weights, reporting each chunk's arrival
  // to `on_chunk` (for progress reports).
  WeightSyncStats receive(const ChunkObserver& on_chunk = {});

 private:
  torch::nn::Module& rollout_;
  RolloutGroups groups_;
  WeightBroadcastOptions options_;
  std::vector<SentParameter> stream_;
};

}  // namespace megacpp::rl
