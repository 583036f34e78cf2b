#include "checkpoint/model_args.h"

#include <optional>
#include <stdexcept>

namespace megacpp::checkpoint {
namespace {

io::serialization::PyValue to_py(const std::string& key, const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return io::serialization::PyValue::none();
    case nlohmann::json::value_t::boolean: return io::serialization::PyValue::boolean(value.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return io::serialization::PyValue::integer(value.get<int64_t>());
    case nlohmann::json::value_t::number_float: return io::serialization::PyValue::real(value.get<double>());
    case nlohmann::json::value_t::string: return io::serialization::PyValue::string(value.get<std::string>());
    case nlohmann::json::value_t::array: {  // argparse's nargs='+' (e.g. MindSpeed's lora_target_modules)
      std::vector<io::serialization::PyValue> items;
      for (const auto& item : value) items.push_back(to_py(key, item));
      return io::serialization::PyValue::list(std::move(items));
    }
    default: throw std::invalid_argument("args field '" + key + "': " + value.dump() + " is not a plain value");
  }
}

}  // namespace

io::serialization::PyValue args_namespace(const nlohmann::json& fields, std::vector<std::pair<io::serialization::PyValue, io::serialization::PyValue>> extra) {
  std::vector<std::pair<io::serialization::PyValue, io::serialization::PyValue>> items;
  for (const auto& [key, value] : fields.items()) items.emplace_back(io::serialization::PyValue::string(key), to_py(key, value));
  for (auto& item : extra) items.push_back(std::move(item));
  return io::serialization::PyValue::object(io::serialization::PyValue::global("argparse", "Namespace"), io::serialization::PyValue::tuple({}), io::serialization::PyValue::dict(std::move(items)),
                         /*newobj=*/true);
}

const io::serialization::PyValue& args_fields(const io::serialization::PyValue& args) { return args.kind() == io::serialization::PyValue::Kind::kObject ? args.state() : args; }

namespace {

// A plain value, or a list of them; nothing for other objects.
std::optional<nlohmann::json> plain_json(const io::serialization::PyValue& value) {
  using Kind = io::serialization::PyValue::Kind;
  switch (value.kind()) {
    case Kind::kNone: return nlohmann::json(nullptr);
    case Kind::kBool: return nlohmann::json(value.as_bool());
    case Kind::kInt: return nlohmann::json(value.as_int());
    case Kind::kFloat: return nlohmann::json(value.as_float());
    case Kind::kString: return nlohmann::json(value.as_string());
    case Kind::kList: {
      nlohmann::json items = nlohmann::json::array();
      for (const auto& item : value.items()) {
        auto converted = plain_json(item);
        if (!converted || converted->is_array()) return std::nullopt;
        items.push_back(*converted);
      }
      return items;
    }
    default: return std::nullopt;
  }
}

}  // namespace

nlohmann::json args_json(const io::serialization::PyValue& args) {
  nlohmann::json out = nlohmann::json::object();
  const io::serialization::PyValue& fields = args_fields(args);
  if (fields.kind() != io::serialization::PyValue::Kind::kDict) return out;
  for (const auto& [key, value] : fields.dict_items()) {
    if (key.kind() != io::serialization::PyValue::Kind::kString) continue;
    if (auto converted = plain_json(value)) out[key.as_string()] = *converted;
  }
  return out;
}

}  // namespace megacpp::checkpoint
