// FSDP2Mixin: how a model is sharded (modelled on MindSpeed-MM's mixin). fully_shard runs
// fixed, logged passes: pre-shard setup -> _fully_shard (recompute, wrap groups in post-order,
// root) -> prefetch lists -> post-shard (initialize weights allocated from the meta device).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "models/fsdp2_config.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/options.h"
#include "parallel/module.h"

namespace megacpp::models {

struct ShardingPlan {
  const parallel::DeviceMesh* mesh = nullptr;
  parallel::fsdp::FullyShardOptions options;   // for every fully_shard call
  std::vector<std::string> wrap_paths;         // post-order
  std::vector<std::string> recompute_paths;
};

class FSDP2Mixin {
 public:
  virtual ~FSDP2Mixin() = default;

  // Shards this model over `mesh` as `config` says, allocating only local shards (also for a
  // model built on the meta device). `post_shard_init`, when given (meta-device init),
  // initializes the weights once the shards exist.
  void fully_shard(const parallel::DeviceMesh& mesh, const FSDP2Config& config, c10::Device device,
                   const std::function<void()>& post_shard_init = nullptr);

  // Paths of the modules wrapped as their own group, in forward order (after fully_shard).
  const std::vector<std::string>& wrapped_module_paths() const { return plan_.wrap_paths; }

 protected:
  // Applies recompute, then fully_shard on every wrapped module (post-order) and the root.
  // Models override it to change how they are wrapped.
  virtual void _fully_shard(const ShardingPlan& plan);

  parallel::Module& self_module();
  parallel::Module& module_at(const std::string& path);

 private:
  ShardingPlan pre_shard(const parallel::DeviceMesh& mesh, const FSDP2Config& config, c10::Device device);
  void set_prefetch(const FSDP2Config& config);

  ShardingPlan plan_;
};

}  // namespace megacpp::models
