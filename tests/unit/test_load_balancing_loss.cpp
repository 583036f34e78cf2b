// The load-balancing loss of a Qwen3-MoE model (Note [Load-balancing loss]): its value and the
// gradients it injects into backward equal those of transformers' load_balancing_loss_func
// written out with autograd over the routers' logits, added to the loss as transformers adds it.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "tests/support/tiny_llama.h"

namespace megacpp::models {
namespace {

constexpr double kCoefficient = 0.25;

LlamaConfig tiny_moe(double coefficient) {
  LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
  config.num_layers = 3;
  config.num_experts = 4;
  config.moe_router_topk = 2;
  config.moe_ffn_hidden_size = 16;
  config.moe_layer_pattern = {1, 0, 1};
  config.moe_aux_loss_coeff = coefficient;
  return config;
}

// transformers' load_balancing_loss_func over the router logits of every MoE layer.
at::Tensor transformers_loss(const std::vector<at::Tensor>& logits, int64_t experts, int64_t top_k) {
  const at::Tensor probs = torch::softmax(torch::cat(logits, 0), -1);
  const at::Tensor chosen = std::get<1>(probs.topk(top_k, -1));
  const at::Tensor tokens_per_expert = torch::one_hot(chosen, experts).to(torch::kFloat).mean(0);  // [k, E]
  const at::Tensor router_prob_per_expert = probs.mean(0);                                        // [E]
  return (tokens_per_expert * router_prob_per_expert.unsqueeze(0)).sum() * static_cast<double>(experts);
}

at::Tensor lm_loss(LlamaModel& model, const at::Tensor& ids) {
  const at::Tensor logits = model(ids.narrow(1, 0, ids.size(1) - 1));
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), ids.narrow(1, 1, ids.size(1) - 1).reshape({-1}));
}

TEST(LoadBalancingLoss, ValueAndGradientsAreTransformers) {
  torch::manual_seed(11);
  const at::Tensor ids = torch::randint(0, 50, {3, 9}, torch::kLong);
  const double backward_scale = 0.5;  // as a trainer with 2 micro-batches

  // megacpp: the lm loss alone goes backward; the model injects the balancing loss's gradients.
  auto injected_model = std::make_shared<LlamaModel>(tiny_moe(kCoefficient), torch::TensorOptions());
  LlamaModel& injected = *injected_model;
  injected.init_weights(0.3, 7);
  injected.set_auxiliary_loss_scale(backward_scale);
  (lm_loss(injected, ids) * backward_scale).backward();
  const auto auxiliary = injected.auxiliary_losses();
  ASSERT_EQ(auxiliary.size(), 1u);
  EXPECT_EQ(auxiliary[0].name, "load_balancing_loss");

  // transformers: the routers' logits, the loss written out, added with its coefficient.
  auto reference_model = std::make_shared<LlamaModel>(tiny_moe(0.0), torch::TensorOptions());
  LlamaModel& reference = *reference_model;
  reference.init_weights(0.3, 7);
  std::vector<at::Tensor> logits;
  for (auto& [path, module] : parallel::named_hookable_modules(reference)) {
    if (path.size() > 9 && path.compare(path.size() - 9, 9, ".mlp.gate") == 0) {
      module->add_post_hook([&logits](parallel::Module&, const parallel::Module::Tensors&, const parallel::Module::Tensors& out) {
        logits.push_back(out[0]);
        return out;
      });
    }
  }
  const at::Tensor loss = lm_loss(reference, ids);
  ASSERT_EQ(logits.size(), 2u) << "two MoE layers";
  const at::Tensor balance = transformers_loss(logits, 4, 2);
  ((loss + kCoefficient * balance) * backward_scale).backward();

  EXPECT_NEAR(auxiliary[0].value, balance.item<double>(), 1e-6);
  EXPECT_GT(balance.item<double>(), 1.0) << "top-2 of 4 experts: 2 when perfectly balanced, more otherwise";
  const auto ours = injected.named_parameters(), theirs = reference.named_parameters();
  size_t router_grads = 0;
  for (const auto& item : theirs) {
    const at::Tensor& expected = item.value().grad();
    const at::Tensor& got = ours[item.key()].grad();
    ASSERT_TRUE(got.defined() == expected.defined()) << item.key();
    if (!expected.defined()) continue;
    EXPECT_TRUE(torch::allclose(got, expected, 1e-5, 1e-7)) << item.key() << ": max diff " << (got - expected).abs().max().item<double>();
    router_grads += item.key().find(".mlp.gate.") != std::string::npos;
  }
  EXPECT_EQ(router_grads, 2u);

  // Without the balancing loss the routers' gradients differ: the check above sees it.
  auto plain_model = std::make_shared<LlamaModel>(tiny_moe(0.0), torch::TensorOptions());
  LlamaModel& plain = *plain_model;
  plain.init_weights(0.3, 7);
  (lm_loss(plain, ids) * backward_scale).backward();
  const at::Tensor router = plain.named_parameters()["layers.0.mlp.gate.weight"].grad();
  EXPECT_FALSE(torch::allclose(router, ours["layers.0.mlp.gate.weight"].grad(), 1e-5, 1e-7));
}

}  // namespace
}  // namespace megacpp::models
