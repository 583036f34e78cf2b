// Note [Megatron flags]
// A Megatron-LM or MindSpeed launch script passes many flags that describe what the model and
// the parallelism are (--swiglu, --normalization RMSNorm, --tensor-model-parallel-size 1, ...).
// megacpp accepts each such flag only with the value that matches what it computes, and says
// why in --help and docs/cli.md; any other value is refused naming the flag and the reason.
// Megatron flags megacpp does not support are refused with a reason too. parse_arguments
// collects every such refusal and every unknown flag into one error.
#pragma once

#include <string>
#include <vector>

#include <cxxopts.hpp>

namespace megacpp::settings {

// Adds the accepted Megatron flags to `options` (their own --help group), but for those in
// `taken` (flags a model family reads itself).
void add_megatron_compatible_flags(cxxopts::Options& options, const std::vector<std::string>& taken);
// "--flag VALUE: not supported (only ...): why" for each accepted flag given another value.
// (`taken` as for add_megatron_compatible_flags.)
std::vector<std::string> megatron_flag_problems(const cxxopts::ParseResult& result, const std::vector<std::string>& taken);
// What megacpp says once in the log about the flags given (e.g. --use-distributed-optimizer).
std::vector<std::string> megatron_flag_notes(const cxxopts::ParseResult& result);
// Whether `flag` (without "--") is one of the Megatron flags add_megatron_compatible_flags adds.
bool is_megatron_compatible_flag(const std::string& flag);
// Why megacpp refuses Megatron's `flag` (without "--"), or "" for a flag it does not know.
std::string unsupported_flag_reason(const std::string& flag);

}  // namespace megacpp::settings
