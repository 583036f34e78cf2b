// megacpp-convert: Hugging Face folders (config.json + safetensors) <-> megacpp checkpoints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_format.h"

namespace megacpp::checkpoint {

struct HfExportOptions {
  std::string load;                 // checkpoint root (Megatron layout)
  std::optional<int64_t> step;      // default: the tracker's iteration
  std::string output;               // the Hugging Face folder to write
  std::string dtype = "float32";    // or "bfloat16"
  uint64_t max_shard_bytes = 5'000'000'000;  // transformers' default "5GB"
  // LoRA (models/lora.h): the adapters are in `load` or, when given, in `lora_load` (then `step`
  // is its iteration and `load` gives the base model).
  std::string lora_load;
  bool merge_lora = false;  // a plain folder with the adapters merged in; else a PEFT adapter folder
  std::string base_model;   // the PEFT folder's base_model_name_or_path (default null)
};

// Writes config.json and model.safetensors (or shards + model.safetensors.index.json) with
// Hugging Face weight names, as the model family the checkpoint's args name (model_type;
// llama when absent) maps them. The model's shape comes from the args. A checkpoint of LoRA
// adapters gives a PEFT adapter folder (checkpoint/lora_export.h), or with merge_lora the model
// with the adapters merged in. Returns a one-line summary.
std::string export_hf(const HfExportOptions& options);

struct HfImportOptions {
  std::string input;  // the Hugging Face folder
  std::string save;   // checkpoint root to write SAVE/release/ into
  CheckpointFormat format = CheckpointFormat::torch_dist();
  std::string model_type;  // the family, when several read config.json's model_type
};

// Writes the weights as a release checkpoint (fp32, model only; the tracker says
// "release"), which `megacpp-train --load SAVE` starts from at iteration 0. Every weight
// the model needs must be there with its shape; errors name the file and the tensor.
// The family is the one that reads config.json's model_type (options.model_type when several
// do). Returns the megacpp-train flags
// that build this model.
std::string import_hf(const HfImportOptions& options);

}  // namespace megacpp::checkpoint
