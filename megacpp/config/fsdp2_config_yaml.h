// Reads fsdp2_config.yaml (MindSpeed's keys) into models::FSDP2Config.
#pragma once

#include <string>

#include "models/fsdp2_config.h"

namespace megacpp::config {

// Throws std::invalid_argument naming the file and the key for an unknown key, a wrong
// type or value, or a file that cannot be read. `defaults` supplies values for absent keys.
models::FSDP2Config load_fsdp2_config(const std::string& path, const models::FSDP2Config& defaults = {});
models::FSDP2Config parse_fsdp2_config(const std::string& yaml_text, const std::string& source,
                                       const models::FSDP2Config& defaults = {});

// "bf16", "bfloat16", "torch.bfloat16", "fp32", "float32", "fp16", "float16" (and torch.*).
c10::ScalarType parse_dtype(const std::string& text, const std::string& key);

}  // namespace megacpp::config
