// Note [Hugging Face folders]
// megacpp-train --init-from-hf-path DIR trains the model a Hugging Face folder holds, as
// MindSpeed-LLM's FSDP2 trainer does:
// - the family is the one that reads config.json's model_type (--model-type chooses when
//   several do); --model-id (MindSpeed-LLM's), Megatron's architecture flags and --model-type,
//   when given, must agree with it;
// - the model is config.json's. A model flag given beside it must describe the same model, or
//   the run is refused naming both values; the flags that change no weight (a RoPE model's
//   --max-position-embeddings) take the value given;
// - the vocabulary is config.json's (the embedding's rows); the tokenizer, unless one is given,
//   is the folder's tokenizer.json;
// - the weights are the folder's safetensors, each rank reading only its shard of each tensor
//   (runtime/hf_initialization.h), unless --load holds a checkpoint, which resumes instead;
// - --load DIR of a Hugging Face folder (config.json and safetensors) without
//   --init-from-hf-path means --init-from-hf-path DIR --load DIR: the folder's model, from its
//   weights, or resumed from the checkpoints --save DIR wrote there.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "models/model_family.h"

namespace megacpp::settings {

// The command line's words with --init-from-hf-path DIR added when --load DIR is a Hugging Face
// folder and no --init-from-hf-path is given (Note [Hugging Face folders]), saying so in `notes`.
std::vector<std::string> with_hf_folder_of_load(std::vector<std::string> words, std::vector<std::string>& notes);

// The family (--model-type) of --init-from-hf-path's folder; nullopt without the flag. Throws
// std::invalid_argument naming the flag or the file and key at fault (a --model-id without the
// folder, or of another model; a model_type no family reads).
std::optional<std::string> hf_folder_model_type(const cxxopts::ParseResult& parsed);

// The model of the folder `dir` as family `model_type` builds it, with the model flags of
// `parsed` checked against it (Note [Hugging Face folders]); `seq_length` must fit it.
std::shared_ptr<const models::ModelConfig> hf_folder_model(const cxxopts::ParseResult& parsed, const std::string& model_type,
                                                           const std::string& dir, int64_t seq_length);

}  // namespace megacpp::settings
