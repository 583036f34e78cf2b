// The load-balancing loss of a mixture-of-experts model (Note [Load-balancing loss]): in each of
// its forms, its value and the gradients it injects into backward equal those of the formula
// written out with autograd over the routers' logits (Megatron's switch_load_balancing_loss_func
// per layer, or per sequence; transformers' load_balancing_loss_func), added to the loss as
// Megatron and transformers add it.
#include <gtest/gtest.h>

#include <tuple>

#include <torch/torch.h>

#include "models/llama/llama_model.h"
#include "tests/support/tiny_llama.h"

namespace megacpp::models {
namespace {

constexpr double kCoefficient = 0.25;

LlamaConfig tiny_moe(double coefficient, const std::string& type) {
  LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
  config.num_layers = 3;
  config.num_experts = 4;
  config.moe_router_topk = 2;
  config.moe_ffn_hidden_size = 16;
  config.moe_layer_pattern = {1, 0, 1};
  config.moe_aux_loss_coeff = coefficient;
  config.moe_load_balancing_type = type;
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

// Megatron's switch_load_balancing_loss_func of one layer over `groups` equal groups of its tokens
// (aux_loss: one; seq_aux_loss: each sequence), averaged over the groups.
at::Tensor megatron_layer_loss(const at::Tensor& logits, int64_t experts, int64_t top_k, int64_t groups) {
  const at::Tensor probs = torch::softmax(logits, -1);
  const at::Tensor chosen = std::get<1>(probs.topk(top_k, -1));
  const int64_t tokens = logits.size(0) / groups;
  const at::Tensor tokens_per_expert = torch::one_hot(chosen, experts).sum(1).view({groups, tokens, experts}).sum(1).to(torch::kFloat);
  const at::Tensor probs_per_expert = probs.view({groups, tokens, experts}).sum(1);
  return ((probs_per_expert * tokens_per_expert).sum(-1) * (static_cast<double>(experts) / (top_k * tokens * tokens))).mean();
}

// What the objective adds (before the coefficient) and what is logged, from the MoE layers'
// router logits of `sequences` sequences, in `layers` layers.
std::pair<at::Tensor, at::Tensor> reference_loss(const std::string& type, const std::vector<at::Tensor>& logits, int64_t experts,
                                                 int64_t top_k, int64_t sequences, int64_t layers) {
  if (type == "transformers") {
    const at::Tensor loss = transformers_loss(logits, experts, top_k);
    return {loss, loss};
  }
  at::Tensor sum = torch::zeros({});
  for (const auto& l : logits) sum = sum + megatron_layer_loss(l, experts, top_k, type == "seq_aux_loss" ? sequences : 1);
  return {sum, sum / static_cast<double>(layers)};  // Megatron's tracker: over every layer
}

at::Tensor lm_loss(LlamaModel& model, const at::Tensor& ids) {
  const at::Tensor logits = model(ids.narrow(1, 0, ids.size(1) - 1));
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), ids.narrow(1, 1, ids.size(1) - 1).reshape({-1}));
}

// megacpp's model with the loss of `type` against the formula written out: the same value and
// the same gradients of every parameter (the routers' included).
void expect_matches_formula(const std::string& type) {
  SCOPED_TRACE(type);
  torch::manual_seed(11);
  const at::Tensor ids = torch::randint(0, 50, {3, 9}, torch::kLong);
  const double backward_scale = 0.5;  // as a trainer with 2 micro-batches

  // megacpp: the lm loss alone goes backward; the model injects the balancing loss's gradients.
  auto injected_model = std::make_shared<LlamaModel>(tiny_moe(kCoefficient, type), torch::TensorOptions());
  LlamaModel& injected = *injected_model;
  injected.init_weights(0.3, 7);
  injected.set_auxiliary_loss_scale(backward_scale);
  (lm_loss(injected, ids) * backward_scale).backward();
  const auto auxiliary = injected.auxiliary_losses();
  ASSERT_EQ(auxiliary.size(), 1u);
  EXPECT_EQ(auxiliary[0].name, "load_balancing_loss");

  // The formula over the routers' logits, added with its coefficient.
  auto reference_model = std::make_shared<LlamaModel>(tiny_moe(0.0, type), torch::TensorOptions());
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
  const auto [objective, logged] = reference_loss(type, logits, 4, 2, ids.size(0), 3);
  ((loss + kCoefficient * objective) * backward_scale).backward();

  EXPECT_NEAR(auxiliary[0].value, logged.item<double>(), 1e-6);
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
  auto plain_model = std::make_shared<LlamaModel>(tiny_moe(0.0, type), torch::TensorOptions());
  LlamaModel& plain = *plain_model;
  plain.init_weights(0.3, 7);
  (lm_loss(plain, ids) * backward_scale).backward();
  const at::Tensor router = plain.named_parameters()["layers.0.mlp.gate.weight"].grad();
  EXPECT_FALSE(torch::allclose(router, ours["layers.0.mlp.gate.weight"].grad(), 1e-5, 1e-7));
}

TEST(LoadBalancingLoss, MegatronsAuxLossPerLayer) { expect_matches_formula("aux_loss"); }
TEST(LoadBalancingLoss, MegatronsSeqAuxLossPerSequence) { expect_matches_formula("seq_aux_loss"); }
TEST(LoadBalancingLoss, TransformersOverEveryLayer) { expect_matches_formula("transformers"); }

TEST(LoadBalancingLoss, NoneComputesNothingAndOtherFormsAreRefusedByName) {
  LlamaModel none(tiny_moe(0.0, "none"), torch::TensorOptions());
  none.init_weights(0.3, 7);
  none(torch::randint(0, 50, {2, 8}, torch::kLong));
  EXPECT_TRUE(none.auxiliary_losses().empty());
  for (const auto& [type, coefficient, message] :
       std::vector<std::tuple<std::string, double, std::string>>{
           {"none", 0.01, "scales no loss with --moe-router-load-balancing-type none"},
           {"sinkhorn", 0.0, "--moe-router-load-balancing-type sinkhorn: Megatron's Sinkhorn routing is not implemented"},
           {"global_aux_loss", 0.0, "global_aux_loss (counts over the data-parallel ranks) is not implemented"},
           {"switch", 0.0, "expected aux_loss, seq_aux_loss, none or transformers"}}) {
    try {
      tiny_moe(coefficient, type).validate();
      ADD_FAILURE() << type;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace megacpp::models
