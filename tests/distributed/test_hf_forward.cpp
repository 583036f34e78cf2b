// Export to a Hugging Face folder, checked by an independent forward pass: each tiny model is
// written as config.json (llama_hf_config) + safetensors under HF names, read by
// tests/reference/hf_forward.py (NumPy, transformers' Llama / Mistral / Qwen2 / Qwen3 math), and its logits must
// match megacpp's on the same tokens. The Qwen3 model is also sharded over 2 ranks (FSDP2) and
// exported from its gathered parameters, through a multi-file checkpoint with an index.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>

#include <torch/torch.h>

#include "models/llama/llama_hf.h"
#include "io/serialization/safetensors.h"
#include "models/llama/llama_model.h"
#include "models/parallelize.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
#include "tests/support/distributed_test.h"
#include "tests/support/hf_reference.h"
#include "tests/support/tiny_llama.h"

namespace megacpp {
namespace {

using models::LlamaConfig;

models::LlamaConfig tiny(bool tied, bool qwen3) { return testing::tiny_llama(tied, qwen3); }

// Seeded init, then norms and biases drawn (testing::draw_norms_and_biases) so that a misplaced
// one shows. The same full values on every rank, sharded or not.
std::shared_ptr<models::LlamaModel> initialize(std::shared_ptr<models::LlamaModel> model) {
  model->init_weights(0.2, 7);
  testing::draw_norms_and_biases(*model, 11);
  return model;
}

void expect_matches_reference(const std::string& what, const std::string& dir, const LlamaConfig& config,
                              const at::Tensor& logits) {
  const double diff = (logits - testing::hf_reference_logits(dir, testing::reference_tokens(), config.vocab_size)).abs().max().item<double>();
  std::cout << what << ": max |megacpp - hf_forward.py| = " << diff << " (logits up to "
            << logits.abs().max().item<double>() << ")" << std::endl;
  EXPECT_LE(diff, 1e-4) << what;
}

void check_unsharded(const std::string& what, const LlamaConfig& config) {
  auto model = initialize(std::make_shared<models::LlamaModel>(config, torch::TensorOptions().dtype(torch::kFloat)));
  at::Tensor logits = (*model)(testing::token_ids(testing::reference_tokens())).detach();
  const std::string dir = testing::scratch_dir();
  testing::write_hf_folder(dir, config, parallel::fsdp::gather_full_parameters(*model), 1ull << 30);
  EXPECT_TRUE(std::ifstream(dir + "/model.safetensors").good());
  expect_matches_reference(what, dir, config, logits);
}

TEST(HfForward, LlamaTiedMatchesReference) { check_unsharded("llama tied", tiny(true, false)); }
TEST(HfForward, LlamaUntiedMatchesReference) { check_unsharded("llama untied", tiny(false, false)); }
TEST(HfForward, Qwen3MatchesReference) { check_unsharded("qwen3", tiny(true, true)); }
TEST(HfForward, MistralSlidingWindowMatchesReference) {
  LlamaConfig mistral = tiny(false, false);
  mistral.sliding_window = 5;  // shorter than the 12 reference tokens
  check_unsharded("mistral (sliding window 5)", mistral);
}
TEST(HfForward, Qwen2BiasesMatchReference) {
  LlamaConfig qwen2 = tiny(false, false);
  qwen2.add_qkv_bias = true;
  check_unsharded("qwen2 (q/k/v biases)", qwen2);
}

TEST(HfForward, ShardedQwen3ExportsGatheredWeights) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    const LlamaConfig config = tiny(false, true);
    auto mesh = parallel::DeviceMesh::build(rt, -1);
    auto model = std::make_shared<models::LlamaModel>(config, torch::TensorOptions().dtype(torch::kFloat));
    models::ParallelizeSettings sharded;
    sharded.wrap.sub_modules_to_wrap = {"layers.{*}"};
    models::parallelize(*model, mesh, sharded);
    initialize(model);
    // q_norm / k_norm [12] are sharded like every other parameter (6 rows per rank).
    EXPECT_EQ(model->named_parameters()["layers.0.self_attn.q_norm.weight"].size(0), 6);
    auto full = parallel::fsdp::gather_full_parameters(*model);  // collective
    at::Tensor logits = (*model)(testing::token_ids(testing::reference_tokens())).detach();
    if (rt.rank() != 0) return;
    const std::string dir = testing::scratch_dir();
    testing::write_hf_folder(dir, config, full, 20000);  // ~60 KB of weights: several shards + index
    EXPECT_TRUE(std::ifstream(dir + "/" + io::serialization::kSafetensorsIndexName).good());
    expect_matches_reference("qwen3 sharded on 2 ranks", dir, config, logits);
  });
}

}  // namespace
}  // namespace megacpp
