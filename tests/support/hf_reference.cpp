#include "tests/support/hf_reference.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "checkpoint/checkpoint_model.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/lora_export.h"
#include "checkpoint/tensor_convert.h"
#include "io/serialization/safetensors.h"
#include "models/llama/llama_model.h"
#include "models/lora.h"
#include "models/registry.h"
#include "parallel/fsdp/fully_shard.h"
#include "tests/support/command.h"
#include "tests/support/tiny_llama.h"

namespace megacpp::testing {

at::Tensor hf_reference_logits(const std::string& hf_dir, const std::vector<std::vector<int64_t>>& tokens, int64_t vocab,
                               const std::string& script, double* load_balancing_loss, const std::string& peft_dir) {
  std::string command = reference_script(script) + " " + hf_dir;
  if (!peft_dir.empty()) command += " --peft " + peft_dir;
  for (const auto& row : tokens) {
    command += " --tokens ";
    for (size_t i = 0; i < row.size(); ++i) command += (i ? "," : "") + std::to_string(row[i]);
  }
  const std::string out = hf_dir + "/reference_logits.f32";
  command += " --out " + out;
  const std::string balance = hf_dir + "/reference_load_balancing_loss.txt";
  if (load_balancing_loss) command += " --load-balancing-loss-out " + balance;
  const auto result = run_command(command);
  EXPECT_EQ(result.status, 0) << command << "\n" << result.output;
  if (load_balancing_loss) std::ifstream(balance) >> *load_balancing_loss;
  const int64_t seq = tokens.empty() ? 0 : static_cast<int64_t>(tokens.front().size());
  at::Tensor logits = torch::zeros({static_cast<int64_t>(tokens.size()), seq, vocab}, torch::kFloat);
  std::ifstream(out, std::ios::binary).read(static_cast<char*>(logits.data_ptr()), static_cast<std::streamsize>(logits.nbytes()));
  return logits;
}

void draw_norms_and_biases(torch::nn::Module& model, uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& item : model.named_parameters()) {
    const bool norm = item.key().find("norm") != std::string::npos;
    if (!norm && item.key().find(".bias") == std::string::npos) continue;
    at::Tensor full = torch::empty(parallel::fsdp::full_shape(item.value()), torch::kFloat);
    parallel::fsdp::copy_full_into_parameter(item.value(), norm ? full.uniform_(0.5, 1.5, generator) : full.uniform_(-0.5, 0.5, generator));
  }
}

void write_hf_folder(const std::string& dir, const models::ModelConfig& config, const std::map<std::string, at::Tensor>& full_params,
                     uint64_t max_shard_bytes) {
  const models::ModelFamily& family = models::model_family(config.model_type());
  std::ofstream(dir + "/config.json") << family.to_hf_config(config, "float32").dump(2) << "\n";
  std::vector<std::pair<std::string, at::Tensor>> stored;  // kept alive while writing
  for (auto& [fqn, tensor] : full_params) {
    const models::HfTensorName hf = family.to_hf_tensor(config, fqn);
    at::Tensor t = tensor.to(torch::kFloat) + hf.offset;
    stored.emplace_back(hf.name, (hf.transposed ? t.t() : t).contiguous());
  }
  std::vector<std::pair<std::string, io::serialization::TensorView>> views;
  for (auto& [name, t] : stored) views.emplace_back(name, checkpoint::safetensors_view(t));
  io::serialization::save_safetensors_sharded(dir, views, max_shard_bytes);
}

at::Tensor token_ids(const std::vector<std::vector<int64_t>>& tokens) {
  std::vector<at::Tensor> rows;
  for (const auto& row : tokens) rows.push_back(torch::tensor(row));
  return torch::stack(rows);
}

void write_qwen2_folder(const std::string& dir, uint64_t max_shard_bytes) {
  models::LlamaConfig config = tiny_llama(/*tied=*/false, /*qwen3=*/false);
  config.add_qkv_bias = true;
  models::LlamaModel model(config, torch::TensorOptions().dtype(torch::kFloat));
  model.init_weights(0.2, 7);
  draw_norms_and_biases(model, 11);
  std::filesystem::create_directories(dir);
  write_hf_folder(dir, config, parallel::fsdp::gather_full_parameters(model), max_shard_bytes);
}

const std::vector<std::vector<int64_t>>& reference_tokens() {
  static const std::vector<std::vector<int64_t>> tokens = {{3, 17, 42, 0, 8, 49, 21, 5, 33, 11, 26, 2},
                                                           {7, 7, 1, 30, 48, 2, 19, 26, 40, 13, 13, 45}};
  return tokens;
}

at::Tensor checkpoint_logits(const std::string& root, const std::vector<std::vector<int64_t>>& tokens,
                             std::vector<models::AuxiliaryLoss>* auxiliary, const std::string& base_root, const at::Tensor& images) {
  auto reader = checkpoint::CheckpointReader::open(root, std::nullopt);
  auto base = base_root.empty() ? reader : checkpoint::CheckpointReader::open(base_root, std::nullopt);
  auto model = models::create_model(*checkpoint::checkpoint_model(*reader), torch::TensorOptions().dtype(torch::kFloat));
  if (const auto lora = checkpoint::checkpoint_lora(*reader); lora.rank > 0) models::apply_lora(*model, lora);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    const std::string key = reader->format().model_key(item.key());
    const auto& from = reader->tensors().has(key) ? *reader : *base;
    item.value().copy_(from.tensors().read_tensor(from.format().model_key(item.key())));
  }
  model->eval();
  const at::Tensor ids = token_ids(tokens);
  at::Tensor logits = (images.defined() ? (*model)(parallel::Module::Tensors{ids, images})[0] : (*model)(ids)).detach();
  if (auxiliary) *auxiliary = model->auxiliary_losses();
  return logits;
}

at::Tensor llava_reference_logits(const std::string& hf_dir, const std::vector<std::vector<int64_t>>& tokens, const at::Tensor& pixels,
                                  int64_t vocab) {
  const std::string pixels_file = hf_dir + "/reference_pixels.f32", out = hf_dir + "/reference_logits.f32";
  const at::Tensor contiguous = pixels.contiguous();
  std::ofstream(pixels_file, std::ios::binary)
      .write(static_cast<const char*>(contiguous.data_ptr()), static_cast<std::streamsize>(contiguous.nbytes()));
  std::string command = reference_script("llava_forward.py") + " " + hf_dir + " --pixels " + pixels_file + " --images " +
                        std::to_string(pixels.size(0)) + " --out " + out;
  for (const auto& row : tokens) {
    command += " --tokens ";
    for (size_t i = 0; i < row.size(); ++i) command += (i ? "," : "") + std::to_string(row[i]);
  }
  const auto result = run_command(command);
  EXPECT_EQ(result.status, 0) << command << "\n" << result.output;
  const int64_t seq = tokens.empty() ? 0 : static_cast<int64_t>(tokens.front().size());
  at::Tensor logits = torch::zeros({static_cast<int64_t>(tokens.size()), seq, vocab}, torch::kFloat);
  std::ifstream(out, std::ios::binary).read(static_cast<char*>(logits.data_ptr()), static_cast<std::streamsize>(logits.nbytes()));
  return logits;
}

}  // namespace megacpp::testing
