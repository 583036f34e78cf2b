#include "checkpoint/hf_convert.h"

#include <filesystem>
#include <map>
#include <sstream>
#include <utility>
#include <stdexcept>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_model.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_saver.h"
#include "checkpoint/hf_folder.h"
#include "checkpoint/lora_export.h"
#include "checkpoint/model_args.h"
#include "checkpoint/tensor_convert.h"
#include "io/serialization/safetensors.h"
#include "models/registry.h"

namespace megacpp::checkpoint {
namespace fs = std::filesystem;
namespace {

// The parameters a model of `config` has, by name, with their shapes (built on the meta
// device: no memory).
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_parameters(const models::ModelConfig& config) {
  auto model = models::create_model(config, at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& item : model->named_parameters(true)) out.emplace_back(item.key(), item.value().sizes().vec());
  return out;
}

// The checkpoint under `root`; throws naming `flag` when there is none.
CheckpointReader open_checkpoint(const std::string& root, std::optional<int64_t> step, const std::string& flag) {
  auto reader = CheckpointReader::open(root, step, flag);
  if (!reader) throw std::runtime_error(flag + " " + root + " has no checkpoint (no " + io::checkpoint::tracker_path(root) + ")");
  return std::move(*reader);
}

// The base model's weights by megacpp name, as the checkpoint holds them.
std::map<std::string, at::Tensor> read_weights(const CheckpointReader& reader,
                                               const std::vector<std::pair<std::string, std::vector<int64_t>>>& expected, bool lora) {
  std::map<std::string, at::Tensor> weights;
  for (const auto& [fqn, shape] : expected) {
    const std::string key = reader.format().model_key(fqn);
    if (!reader.tensors().has(key)) {
      throw std::runtime_error(reader.dir() + ": no tensor '" + fqn + "' (key '" + key + "')" +
                               (lora ? std::string("; LoRA adapters saved without --lora-save-base hold no base model: give the base "
                                                   "model's checkpoint with --load and the adapters' with --lora-load")
                                     : std::string()));
    }
    at::Tensor t = reader.tensors().read_tensor(key);
    if (t.sizes().vec() != shape) {
      throw std::runtime_error(reader.dir() + ": '" + fqn + "' has shape " + io::serialization::shape_string(t.sizes().vec()) +
                               " but the model in args needs " + io::serialization::shape_string(shape));
    }
    weights.emplace(fqn, t);
  }
  return weights;
}

}  // namespace

std::string export_hf(const HfExportOptions& options) {
  if (options.dtype != "float32" && options.dtype != "bfloat16") {
    throw std::invalid_argument("--dtype must be float32 or bfloat16 (got '" + options.dtype + "')");
  }
  if (options.max_shard_bytes == 0) throw std::invalid_argument("--max-shard-size must be positive");
  if (options.merge_lora && !options.base_model.empty()) {
    throw std::invalid_argument("--base-model names a PEFT folder's base; --merge-lora writes no PEFT folder");
  }
  const bool separate_adapters = !options.lora_load.empty();
  const CheckpointReader reader = open_checkpoint(options.load, separate_adapters ? std::nullopt : options.step, "--load");
  const auto config_ptr = checkpoint_model(reader);
  const models::ModelConfig& config = *config_ptr;
  const models::ModelFamily& family = models::model_family(config.model_type());
  const at::ScalarType type = options.dtype == "bfloat16" ? at::kBFloat16 : at::kFloat;
  std::optional<CheckpointReader> lora_reader;
  if (separate_adapters) lora_reader = open_checkpoint(options.lora_load, options.step, "--lora-load");
  const CheckpointReader& adapters = lora_reader ? *lora_reader : reader;
  const models::LoraSettings lora = checkpoint_lora(adapters);
  if (lora.rank == 0 && (separate_adapters || options.merge_lora)) {
    throw std::invalid_argument((separate_adapters ? "--lora-load " : "--merge-lora: --load ") +
                                (separate_adapters ? options.lora_load : options.load) +
                                " holds no LoRA adapters (its args record no lora_r)");
  }
  if (lora.rank > 0 && !options.merge_lora) return export_peft(adapters, config, lora, options.output, type, options.base_model);

  const auto expected = expected_parameters(config);
  std::map<std::string, at::Tensor> weights = read_weights(reader, expected, lora.rank > 0);
  if (lora.rank > 0) merge_lora(weights, adapters, config, lora);
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // HF name, values (kept alive while writing)
  for (const auto& [fqn, shape] : expected) {
    at::Tensor t = weights.at(fqn);
    const models::HfTensorName hf = family.to_hf_tensor(config, fqn);
    if (hf.offset != 0.0) t = t.to(at::kFloat) + hf.offset;
    tensors.emplace_back(hf.name, (hf.transposed ? t.t() : t).to(type).contiguous());
  }
  std::vector<std::pair<std::string, io::serialization::TensorView>> views;
  for (const auto& [name, t] : tensors) views.emplace_back(name, safetensors_view(t));
  fs::create_directories(options.output);
  const io::serialization::ShardPlan plan = io::serialization::save_safetensors_sharded(options.output, views, options.max_shard_bytes);
  io::serialization::write_file_atomically((fs::path(options.output) / "config.json").string(), family.to_hf_config(config, options.dtype).dump(2) + "\n");
  std::ostringstream summary;
  summary << "exported " << tensors.size() << " tensors (" << options.dtype << ", " << plan.filenames.size() << " file"
          << (plan.filenames.size() > 1 ? "s" : "") << (lora.rank > 0 ? ", LoRA adapters merged" : "") << ") from " << reader.dir()
          << " to " << options.output;
  return summary.str();
}

std::string import_hf(const HfImportOptions& options) {
  const std::string config_path = hf_config_path(options.input);
  const nlohmann::json hf_config = read_hf_config(options.input);
  const models::ModelFamily& family = family_of_hf_config(hf_config, config_path, options.model_type);
  const auto config_ptr = family.from_hf_config(hf_config, config_path);
  const models::ModelConfig& config = *config_ptr;
  const HfFolderWeights weights(options.input, family, config);

  if (io::checkpoint::read_tracker(options.save)) {
    throw std::runtime_error("--save " + options.save + " already holds checkpoints (" + io::checkpoint::tracker_path(options.save) +
                             "); import into a new directory");
  }
  SaveJob job;
  job.root = options.save;
  job.iteration = io::checkpoint::kReleaseIteration;
  job.format = options.format;
  const auto expected = expected_parameters(config);
  for (const auto& [fqn, shape] : expected) weights.check(fqn, shape);  // all present before any is written
  for (const auto& [fqn, shape] : expected) {
    job.items.add_block(options.format.model(fqn), shape, std::vector<int64_t>(shape.size(), 0), weights.full(fqn, shape));
  }
  nlohmann::json args = config.to_args();
  args["model_type"] = config.model_type();
  job.add_unsharded("iteration", io::serialization::PyValue::integer(0));
  job.add_unsharded("checkpoint_version", io::serialization::PyValue::real(io::checkpoint::kCheckpointVersion));
  job.add_unsharded("args", args_namespace(args));
  const std::string tmp = io::checkpoint::checkpoint_dir(options.save, io::checkpoint::kReleaseIteration) + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  publish_checkpoint(job, tmp, write_rank_file(tmp, 0, job.items));
  std::string flags = "--model-type " + config.model_type() + " " + config.to_flags();
  if (const auto vocab = args.find("padded_vocab_size"); vocab != args.end()) flags += " (vocabulary " + vocab->dump() + ")";
  return flags;
}

}  // namespace megacpp::checkpoint
