// The parameters one fully_shard call owns, gathered and reduced together: one flat
// all-gather before compute, one flat reduce-scatter after backward.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/collectives.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/comm_streams.h"
#include "parallel/fsdp/fsdp_param.h"
#include "parallel/fsdp/options.h"

namespace megacpp::parallel::fsdp {

class FSDPParamGroup {
 public:
  FSDPParamGroup(std::string name, std::vector<std::unique_ptr<FSDPParam>> params,
                 const DeviceMesh& mesh, const FullyShardOptions& options);
  ~FSDPParamGroup();
  FSDPParamGroup(const FSDPParamGroup&) = delete;
  FSDPParamGroup& operator=(const FSDPParamGroup&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<std::unique_ptr<FSDPParam>>& params() const { return params_; }
  bool has_trainable_params() const;

  // Starts the all-gather of this group's shards (no-op if gathered or in flight).
  void unshard_async();
  // Completes the all-gather and points the modules at the gathered parameters.
  void wait_for_unshard();
  // Frees the gathered parameters and points the modules back at the shards.
  void reshard();

  // Issues the reduce-scatter of the gathered parameters' gradients (Note [Gradient
  // reduction]); finish_reduce() waits for it, all-reduces over the ddp group (HSDP), divides
  // and adds the result into the shards' .grad. No-op without trainable parameters.
  void reduce_gradients_async();
  void finish_reduce();
  // FSDP2's set_gradient_divide_factor: the reduced gradients are divided by `factor` instead
  // of the data-parallel size (the sum over ranks with 1).
  void set_gradient_divide_factor(double factor) { divide_factor_ = factor; }

  int64_t shard_numel() const { return shard_numel_; }

 private:
  enum class State { kSharded, kGathering, kUnsharded };
  void wait_for_gather();  // the current stream waits for the all-gather in flight
  void release_gather_buffers();  // Note [Streams]: once the copy-out has read them

  std::string name_;
  std::vector<std::unique_ptr<FSDPParam>> params_;
  std::vector<int64_t> offsets_;  // [params] column of each parameter in a rank's flat shard
  const DeviceMesh& mesh_;
  FullyShardOptions options_;
  at::ScalarType param_dtype_;
  at::ScalarType reduce_dtype_;
  int64_t shard_numel_ = 0;  // sum of padded_numel: one rank's flat shard
  State state_ = State::kSharded;
  CommStreams* streams_;  // Note [Streams]; null: everything on the current stream
  at::Tensor gather_input_, gather_output_;  // [shard_numel], [world, shard_numel] param_dtype; only while gathering
  PendingCollective pending_gather_;
  PendingEvent gathered_;  // on the all-gather stream, after the collective
  at::Tensor reduce_input_, reduce_output_;  // [world, shard_numel], [shard_numel]; only while reducing
  PendingCollective pending_reduce_;
  PendingEvent reduce_scattered_;  // on the reduce-scatter stream, after the collective
  double divide_factor_ = 0;  // 0: the data-parallel size
};

}  // namespace megacpp::parallel::fsdp
