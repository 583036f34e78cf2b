// What fsdp2_config.yaml says (MindSpeed's keys), as FSDP2Mixin consumes it.
#pragma once

#include <string>
#include <vector>

#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

namespace megacpp::models {

struct FSDP2Config {
  int sharding_size = -1;                         // <= 1 or >= world: full sharding; else HSDP
  std::vector<std::string> sub_modules_to_wrap;   // module patterns sharded as their own group
  std::vector<std::string> ignored_modules;       // kept whole, gradients averaged like DDP
  std::vector<std::string> recompute_modules;     // activation recompute
  bool reshard_after_forward = true;
  c10::optional<c10::ScalarType> param_dtype;
  c10::optional<c10::ScalarType> reduce_dtype;
  c10::optional<c10::ScalarType> output_dtype;
  bool cast_forward_inputs = true;
  int num_to_forward_prefetch = 0;
  int num_to_backward_prefetch = 0;
};

}  // namespace megacpp::models
