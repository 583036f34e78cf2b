// The parameters one fully_shard call owns, gathered and reduced together: one flat
// all-gather before compute, one flat reduce-scatter after backward.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/collectives.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fsdp_param.h"
#include "parallel/fsdp/options.h"

namespace megacpp::parallel::fsdp {

class FSDPParamGroup {
 public:
  FSDPParamGroup(std::string name, std::vector<std::unique_ptr<FSDPParam>> params,
                 const DeviceMesh& mesh, const FullyShardOptions& options);

  const std::string& name() const { return name_; }
  const std::vector<std::unique_ptr<FSDPParam>>& params() const { return params_; }
  bool has_trainable_params() const;

  // Starts the all-gather of this group's shards (no-op if gathered or in flight).
  void unshard_async();
  // Completes the all-gather and points the modules at the gathered parameters.
  void wait_for_unshard();
  // Frees the gathered parameters and points the modules back at the shards.
  void reshard();

  // Reduce-scatters the gradients of the gathered parameters (Note [Gradient reduction])
  // and adds the result into the shards' .grad.
  void reduce_gradients();

  int64_t shard_numel() const { return shard_numel_; }

 private:
  enum class State { kSharded, kGathering, kUnsharded };

  std::string name_;
  std::vector<std::unique_ptr<FSDPParam>> params_;
  std::vector<int64_t> offsets_;  // [params] column of each parameter in a rank's flat shard
  const DeviceMesh& mesh_;
  FullyShardOptions options_;
  at::ScalarType param_dtype_;
  at::ScalarType reduce_dtype_;
  int64_t shard_numel_ = 0;  // sum of padded_numel: one rank's flat shard
  State state_ = State::kSharded;
  at::Tensor gather_output_;  // [world, shard_numel] param_dtype; only while gathering
  PendingCollective pending_gather_;
};

}  // namespace megacpp::parallel::fsdp
