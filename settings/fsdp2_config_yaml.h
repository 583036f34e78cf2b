// Reads fsdp2_config.yaml into FSDP2Config: MindSpeed's keys, or ROLL's FSDP2
// strategy_config names (flat, under `strategy_config:`, or under
// `strategy_args: {strategy_name, strategy_config}`). docs/fsdp2_config.md lists them all.
#pragma once

#include <string>

#include "settings/fsdp2_config.h"

namespace megacpp::settings {

// Throws std::invalid_argument naming the file and the key for an unknown key, a wrong
// type or value, a ROLL key whose feature megacpp lacks set to a non-default value, one
// setting given in both spellings (sharding_size and fsdp_size), or a file that cannot be
// read. `defaults` supplies values for absent keys. ROLL's wrap_policy stays by class name
// in the result (FSDP2Mixin::resolve_module_classes maps it onto the model).
FSDP2Config load_fsdp2_config(const std::string& path, const FSDP2Config& defaults = {});
FSDP2Config parse_fsdp2_config(const std::string& yaml_text, const std::string& source,
                               const FSDP2Config& defaults = {});

// "bf16", "bfloat16", "torch.bfloat16", "fp32", "float32", "fp16", "float16" (and torch.*).
c10::ScalarType parse_dtype(const std::string& text, const std::string& key);

}  // namespace megacpp::settings
