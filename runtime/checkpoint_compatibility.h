// Whether a checkpoint holds the model the flags build (Megatron's check_checkpoint_args): the
// saved `args` are compared with the model's config, and tensors the model does not have are
// refused unless --finetune with --dist-ckpt-strictness says to ignore them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/dcp_io.h"
#include "models/model_family.h"

namespace megacpp::runtime {

// Throws std::runtime_error naming every model field whose value in the checkpoint's `args`
// (`saved`, plain values as checkpoint::args_json gives them) differs from `model`'s, as the
// flag that sets it with both values. Fields the checkpoint does not record are not compared.
void check_checkpoint_model(const nlohmann::json& saved, const models::ModelConfig& model, const std::string& where);

// The tensors in `reader` that are none of `expected` (every key this model's load reads, for
// all ranks and with the optimizer), sorted.
std::vector<std::string> unexpected_tensors(const checkpoint::DcpReader& reader, const std::vector<std::string>& expected);

}  // namespace megacpp::runtime
