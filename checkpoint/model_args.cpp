#include "checkpoint/model_args.h"

#include <stdexcept>

namespace megacpp::checkpoint {
namespace {

PyValue to_py(const std::string& key, const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return PyValue::none();
    case nlohmann::json::value_t::boolean: return PyValue::boolean(value.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return PyValue::integer(value.get<int64_t>());
    case nlohmann::json::value_t::number_float: return PyValue::real(value.get<double>());
    case nlohmann::json::value_t::string: return PyValue::string(value.get<std::string>());
    default: throw std::invalid_argument("args field '" + key + "': " + value.dump() + " is not a plain value");
  }
}

}  // namespace

PyValue args_namespace(const nlohmann::json& fields, std::vector<std::pair<PyValue, PyValue>> extra) {
  std::vector<std::pair<PyValue, PyValue>> items;
  for (const auto& [key, value] : fields.items()) items.emplace_back(PyValue::string(key), to_py(key, value));
  for (auto& item : extra) items.push_back(std::move(item));
  return PyValue::object(PyValue::global("argparse", "Namespace"), PyValue::tuple({}), PyValue::dict(std::move(items)),
                         /*newobj=*/true);
}

const PyValue& args_fields(const PyValue& args) { return args.kind() == PyValue::Kind::kObject ? args.state() : args; }

nlohmann::json args_json(const PyValue& args) {
  nlohmann::json out = nlohmann::json::object();
  const PyValue& fields = args_fields(args);
  if (fields.kind() != PyValue::Kind::kDict) return out;
  for (const auto& [key, value] : fields.dict_items()) {
    if (key.kind() != PyValue::Kind::kString) continue;
    switch (value.kind()) {
      case PyValue::Kind::kNone: out[key.as_string()] = nullptr; break;
      case PyValue::Kind::kBool: out[key.as_string()] = value.as_bool(); break;
      case PyValue::Kind::kInt: out[key.as_string()] = value.as_int(); break;
      case PyValue::Kind::kFloat: out[key.as_string()] = value.as_float(); break;
      case PyValue::Kind::kString: out[key.as_string()] = value.as_string(); break;
      default: break;
    }
  }
  return out;
}

}  // namespace megacpp::checkpoint
