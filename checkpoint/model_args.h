// A checkpoint's `args`: Megatron keeps the arguments of the run in an argparse.Namespace, so
// a checkpoint says which model it holds (megacpp-convert exports it without any flags). The
// model's fields come from its family as a flat JSON object; this layer only converts.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/serialization/pickle.h"

namespace megacpp::checkpoint {

// argparse.Namespace(**fields, **extra): `fields` a flat JSON object of numbers, booleans,
// strings and nulls (a family's ModelConfig::to_args, with model_type).
io::serialization::PyValue args_namespace(const nlohmann::json& fields, std::vector<std::pair<io::serialization::PyValue, io::serialization::PyValue>> extra = {});
// The fields of a saved `args` (a dict, or a Namespace's attribute dict).
const io::serialization::PyValue& args_fields(const io::serialization::PyValue& args);
// The saved `args` fields that are plain values (None, bool, int, float, str) as a JSON
// object; others (lists, tensors, ...) are left out.
nlohmann::json args_json(const io::serialization::PyValue& args);

}  // namespace megacpp::checkpoint
