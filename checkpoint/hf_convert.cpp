#include "checkpoint/hf_convert.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_saver.h"
#include "checkpoint/hf_config.h"
#include "checkpoint/model_args.h"
#include "checkpoint/safetensors.h"
#include "models/registry.h"

namespace megacpp::checkpoint {
namespace fs = std::filesystem;
namespace {

std::string safetensors_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "F32";
    case at::kBFloat16: return "BF16";
    case at::kHalf: return "F16";
    default: throw std::invalid_argument(std::string("no safetensors dtype for ") + c10::toString(type));
  }
}

at::ScalarType scalar_type_of(const std::string& dtype, const std::string& what) {
  if (dtype == "F32") return at::kFloat;
  if (dtype == "BF16") return at::kBFloat16;
  if (dtype == "F16") return at::kHalf;
  throw std::runtime_error(what + ": dtype " + dtype + " is not a floating-point weight type megacpp imports (F32, BF16, F16)");
}

// The parameters a model of `config` has, by name, with their shapes (built on the meta
// device: no memory).
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_parameters(const models::LlamaConfig& config) {
  auto model = models::create_model("llama", config, at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& item : model->named_parameters(true)) out.emplace_back(item.key(), item.value().sizes().vec());
  return out;
}


}  // namespace

std::string export_hf(const HfExportOptions& options) {
  if (options.dtype != "float32" && options.dtype != "bfloat16") {
    throw std::invalid_argument("--dtype must be float32 or bfloat16 (got '" + options.dtype + "')");
  }
  auto reader = CheckpointReader::open(options.load, options.step);
  if (!reader) throw std::runtime_error("--load " + options.load + " has no checkpoint (no " + tracker_path(options.load) + ")");
  const models::LlamaConfig config = llama_config_from_args(reader->object("args"), reader->dir());
  const at::ScalarType type = options.dtype == "bfloat16" ? at::kBFloat16 : at::kFloat;

  std::vector<std::pair<std::string, at::Tensor>> tensors;  // HF name, values (kept alive while writing)
  for (const auto& [fqn, shape] : expected_parameters(config)) {
    at::Tensor t = reader->tensors().read_tensor(model_key(reader->format(), fqn));
    if (t.sizes().vec() != shape) {
      throw std::runtime_error(reader->dir() + ": '" + fqn + "' has shape " + shape_string(t.sizes().vec()) +
                               " but the model in args needs " + shape_string(shape));
    }
    tensors.emplace_back(to_hf_name(fqn), t.to(type).contiguous());
  }
  std::vector<std::pair<std::string, TensorView>> views;
  for (const auto& [name, t] : tensors) {
    views.emplace_back(name, TensorView{safetensors_dtype(t.scalar_type()), t.sizes().vec(),
                                        static_cast<const uint8_t*>(t.data_ptr()), static_cast<size_t>(t.nbytes())});
  }
  fs::create_directories(options.output);
  const ShardPlan plan = save_safetensors_sharded(options.output, views, options.max_shard_bytes);
  write_file_atomically((fs::path(options.output) / "config.json").string(), to_hf_config(config, options.dtype).dump(2) + "\n");
  std::ostringstream summary;
  summary << "exported " << tensors.size() << " tensors (" << options.dtype << ", " << plan.filenames.size() << " file"
          << (plan.filenames.size() > 1 ? "s" : "") << ") from " << reader->dir() << " to " << options.output;
  return summary.str();
}

std::string import_hf(const HfImportOptions& options) {
  const std::string config_path = (fs::path(options.input) / "config.json").string();
  const models::LlamaConfig config = read_hf_config(config_path);
  const SafetensorsCheckpoint weights = SafetensorsCheckpoint::open(options.input);

  if (read_tracker(options.save)) {
    throw std::runtime_error("--save " + options.save + " already holds checkpoints (" + tracker_path(options.save) +
                             "); import into a new directory");
  }
  SaveJob job;
  job.root = options.save;
  job.iteration = kReleaseIteration;
  job.format = options.format;
  for (const auto& [fqn, shape] : expected_parameters(config)) {
    const std::string hf = to_hf_name(fqn);
    if (!weights.contains(hf)) throw std::runtime_error(options.input + ": no tensor '" + hf + "' (the model of " + config_path + " needs it)");
    const TensorView view = weights.tensor(hf);
    const std::string what = (fs::path(options.input) / weights.filename_of(hf)).string() + ", tensor '" + hf + "'";
    if (view.shape != shape) {
      throw std::runtime_error(what + ": shape " + shape_string(view.shape) + ", the model of " + config_path + " needs " + shape_string(shape));
    }
    at::Tensor t = at::empty(view.shape, at::TensorOptions().dtype(scalar_type_of(view.dtype, what)));
    if (view.nbytes > 0) std::memcpy(t.data_ptr(), view.data, view.nbytes);
    job.items.add_block(model_path(options.format, fqn), shape, std::vector<int64_t>(shape.size(), 0), t.to(at::kFloat));
  }
  for (const auto& name : weights.names()) {
    // Tied models may still carry lm_head.weight (a copy of the embedding): nothing to keep.
    if (name == "lm_head.weight" && config.tie_embeddings) continue;
    from_hf_name(name);  // throws for a tensor no Llama/Qwen3 model has
  }
  job.add_unsharded("iteration", PyValue::integer(0));
  job.add_unsharded("checkpoint_version", PyValue::real(kCheckpointVersion));
  job.add_unsharded("args", args_namespace(llama_args(config)));
  const std::string tmp = checkpoint_dir(options.save, kReleaseIteration) + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  publish_checkpoint(job, tmp, write_rank_file(tmp, 0, job.items));

  std::ostringstream flags;
  flags << "--num-layers " << config.num_layers << " --hidden-size " << config.hidden_size << " --ffn-hidden-size "
        << config.ffn() << " --num-attention-heads " << config.num_attention_heads << " --num-query-groups "
        << config.kv_heads() << " --kv-channels " << config.head_dim() << " --max-position-embeddings "
        << config.max_position_embeddings << " --rotary-base " << config.rotary_base << " --norm-epsilon "
        << config.norm_epsilon << (config.qk_layernorm ? " --qk-layernorm" : "")
        << (config.tie_embeddings ? "" : " --untie-embeddings-and-output-weights") << " (vocabulary "
        << config.vocab_size << ")";
  return flags.str();
}

}  // namespace megacpp::checkpoint
