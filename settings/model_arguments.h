// The model part of megacpp-train's command line: the flags every registered model family
// declares (Note [Model families]), and the libraries (--model-library) that add families.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "models/model_family.h"

namespace megacpp::settings {

// The values of every --model-library in argv ("--model-library P" or "--model-library=P"),
// read before the flags are parsed since the families they register declare flags.
std::vector<std::string> model_libraries_in(int argc, const char* const* argv);
// Declares --model-library (what model_libraries_in reads) in the --help group `group`: every
// program that builds models takes it.
void add_model_library_flag(cxxopts::Options& options, const std::string& group);

// Adds the flags of every registered family to `options` (group "model"); a flag several
// families declare appears once.
void add_model_flags(cxxopts::Options& options);
// The names (without "--") of the flags add_model_flags adds.
std::vector<std::string> model_flag_names();

// The flag that sets a field of a model's Megatron `args` (ModelConfig::to_args): num_layers ->
// "--num-layers"; the padded vocabulary, which has no flag of its own, is named by the flags
// that decide it.
std::string flag_of_arg(const std::string& field);

// The config the family `model_type` builds from the parsed flags; a flag not given takes its
// value from `fallback` (flag name -> value, "true" for a switch) when there, else its default.
// Throws std::invalid_argument naming every given model flag that family does not read, or the
// flag whose value is wrong.
std::shared_ptr<const models::ModelConfig> model_config_from_flags(const cxxopts::ParseResult& parsed,
                                                                   const std::string& model_type,
                                                                   const models::ModelContext& context,
                                                                   const std::map<std::string, std::string>& fallback = {});

}  // namespace megacpp::settings
