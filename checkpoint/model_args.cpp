#include "checkpoint/model_args.h"

#include <stdexcept>

namespace megacpp::checkpoint {

std::vector<std::pair<PyValue, PyValue>> llama_args(const models::LlamaConfig& c) {
  auto s = [](const char* name) { return PyValue::string(name); };
  return {{s("num_layers"), PyValue::integer(c.num_layers)},
          {s("hidden_size"), PyValue::integer(c.hidden_size)},
          {s("ffn_hidden_size"), PyValue::integer(c.ffn())},
          {s("num_attention_heads"), PyValue::integer(c.num_attention_heads)},
          {s("num_query_groups"), PyValue::integer(c.kv_heads())},
          {s("kv_channels"), PyValue::integer(c.head_dim())},
          {s("qk_layernorm"), PyValue::boolean(c.qk_layernorm)},
          {s("max_position_embeddings"), PyValue::integer(c.max_position_embeddings)},
          {s("rotary_base"), PyValue::real(c.rotary_base)},
          {s("norm_epsilon"), PyValue::real(c.norm_epsilon)},
          {s("padded_vocab_size"), PyValue::integer(c.vocab_size)},
          {s("untie_embeddings_and_output_weights"), PyValue::boolean(!c.tie_embeddings)}};
}

PyValue args_namespace(std::vector<std::pair<PyValue, PyValue>> fields) {
  return PyValue::object(PyValue::global("argparse", "Namespace"), PyValue::tuple({}), PyValue::dict(std::move(fields)),
                         /*newobj=*/true);
}

const PyValue& args_fields(const PyValue& args) { return args.kind() == PyValue::Kind::kObject ? args.state() : args; }

models::LlamaConfig llama_config_from_args(const PyValue& args, const std::string& where) {
  const PyValue& fields = args_fields(args);
  auto get = [&](const char* name) -> const PyValue& {
    const PyValue* v = fields.kind() == PyValue::Kind::kDict ? fields.find(name) : nullptr;
    if (!v) throw std::runtime_error(where + ": the saved args have no '" + std::string(name) + "'");
    return *v;
  };
  models::LlamaConfig c;
  c.num_layers = get("num_layers").as_int();
  c.hidden_size = get("hidden_size").as_int();
  c.ffn_hidden_size = get("ffn_hidden_size").as_int();
  c.num_attention_heads = get("num_attention_heads").as_int();
  c.num_query_groups = get("num_query_groups").as_int();
  c.kv_channels = get("kv_channels").as_int();
  c.qk_layernorm = get("qk_layernorm").as_bool();
  c.max_position_embeddings = get("max_position_embeddings").as_int();
  c.rotary_base = get("rotary_base").as_float();
  c.norm_epsilon = get("norm_epsilon").as_float();
  c.vocab_size = get("padded_vocab_size").as_int();
  c.tie_embeddings = !get("untie_embeddings_and_output_weights").as_bool();
  c.validate();
  return c;
}

}  // namespace megacpp::checkpoint
