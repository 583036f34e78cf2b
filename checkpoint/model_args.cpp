#include "checkpoint/model_args.h"

#include <stdexcept>

namespace megacpp::checkpoint {
namespace {

serialization::PyValue to_py(const std::string& key, const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return serialization::PyValue::none();
    case nlohmann::json::value_t::boolean: return serialization::PyValue::boolean(value.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return serialization::PyValue::integer(value.get<int64_t>());
    case nlohmann::json::value_t::number_float: return serialization::PyValue::real(value.get<double>());
    case nlohmann::json::value_t::string: return serialization::PyValue::string(value.get<std::string>());
    default: throw std::invalid_argument("args field '" + key + "': " + value.dump() + " is not a plain value");
  }
}

}  // namespace

serialization::PyValue args_namespace(const nlohmann::json& fields, std::vector<std::pair<serialization::PyValue, serialization::PyValue>> extra) {
  std::vector<std::pair<serialization::PyValue, serialization::PyValue>> items;
  for (const auto& [key, value] : fields.items()) items.emplace_back(serialization::PyValue::string(key), to_py(key, value));
  for (auto& item : extra) items.push_back(std::move(item));
  return serialization::PyValue::object(serialization::PyValue::global("argparse", "Namespace"), serialization::PyValue::tuple({}), serialization::PyValue::dict(std::move(items)),
                         /*newobj=*/true);
}

const serialization::PyValue& args_fields(const serialization::PyValue& args) { return args.kind() == serialization::PyValue::Kind::kObject ? args.state() : args; }

nlohmann::json args_json(const serialization::PyValue& args) {
  nlohmann::json out = nlohmann::json::object();
  const serialization::PyValue& fields = args_fields(args);
  if (fields.kind() != serialization::PyValue::Kind::kDict) return out;
  for (const auto& [key, value] : fields.dict_items()) {
    if (key.kind() != serialization::PyValue::Kind::kString) continue;
    switch (value.kind()) {
      case serialization::PyValue::Kind::kNone: out[key.as_string()] = nullptr; break;
      case serialization::PyValue::Kind::kBool: out[key.as_string()] = value.as_bool(); break;
      case serialization::PyValue::Kind::kInt: out[key.as_string()] = value.as_int(); break;
      case serialization::PyValue::Kind::kFloat: out[key.as_string()] = value.as_float(); break;
      case serialization::PyValue::Kind::kString: out[key.as_string()] = value.as_string(); break;
      default: break;
    }
  }
  return out;
}

}  // namespace megacpp::checkpoint
