// The model's shape as a checkpoint's `args` records it (Megatron's argument names), so a
// checkpoint says which model it holds: megacpp-convert exports it without any flags.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "checkpoint/pickle.h"
#include "models/llama/llama_config.h"

namespace megacpp::checkpoint {

// (name, value) pairs: num_layers, hidden_size, ffn_hidden_size, num_attention_heads,
// num_query_groups, kv_channels, qk_layernorm, max_position_embeddings, rotary_base,
// norm_epsilon, padded_vocab_size, untie_embeddings_and_output_weights.
std::vector<std::pair<PyValue, PyValue>> llama_args(const models::LlamaConfig& config);
// Megatron's saved `args`: an argparse.Namespace with these attributes.
PyValue args_namespace(std::vector<std::pair<PyValue, PyValue>> fields);
// Reads them back from a saved `args` (a dict or an argparse.Namespace); `where` names the
// checkpoint in errors.
models::LlamaConfig llama_config_from_args(const PyValue& args, const std::string& where);
// The fields of a saved `args`: the dict itself, or a Namespace's attribute dict.
const PyValue& args_fields(const PyValue& args);

}  // namespace megacpp::checkpoint
