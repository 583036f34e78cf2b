// megacpp-bench-moe: tokens per second of one mixture-of-experts layer (forward + backward), its
// tokens grouped per expert (SparseMoeBlock: sorted by expert, one pass per expert over its
// slice) against the masked dense form (every expert over every token, each output weighted by
// the token's routing weight, 0 where the expert was not chosen), on the same weights and tokens.
//
//   megacpp-bench-moe [--tokens 4096] [--hidden 256] [--ffn 512] [--experts 16] [--top-k 2]
//                     [--iters 10] [--warmup 2] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <cxxopts.hpp>
#include <torch/torch.h>

#include "models/layers/moe.h"

namespace {

using megacpp::models::MoeShape;
using megacpp::models::SparseMoeBlock;

// The same layer computed densely from the block's parameters.
at::Tensor masked_dense(SparseMoeBlock& block, const MoeShape& shape, const at::Tensor& x) {
  auto params = block.named_parameters();
  const at::Tensor probs = torch::softmax(torch::linear(x, params["gate.weight"]).to(torch::kFloat), -1);
  auto [weights, chosen] = probs.topk(shape.top_k, -1);
  if (shape.norm_topk_prob) weights = weights / weights.sum(-1, true);
  const at::Tensor routing = torch::zeros_like(probs).scatter(1, chosen, weights).to(x.scalar_type());  // [tokens, E]
  at::Tensor out = torch::zeros_like(x);
  for (int64_t e = 0; e < shape.num_experts; ++e) {
    const std::string p = "experts." + std::to_string(e) + ".";
    const at::Tensor h = torch::silu(torch::linear(x, params[p + "gate_proj.weight"])) * torch::linear(x, params[p + "up_proj.weight"]);
    out = out + torch::linear(h, params[p + "down_proj.weight"]) * routing.narrow(1, e, 1);
  }
  return out;
}

// Median milliseconds of forward + backward after the warm-up.
template <class Forward>
double time_ms(const Forward& forward, torch::nn::Module& module, const at::Tensor& x, int warmup, int iters) {
  std::vector<double> ms;
  for (int i = 0; i < warmup + iters; ++i) {
    module.zero_grad();
    const auto start = std::chrono::steady_clock::now();
    forward(x).pow(2).mean().backward();
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= warmup) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("megacpp-bench-moe", "grouped against masked dense expert compute, one MoE layer");
  options.add_options()("tokens", "tokens per batch", cxxopts::value<int64_t>()->default_value("4096"))(
      "hidden", "hidden size", cxxopts::value<int64_t>()->default_value("256"))(
      "ffn", "each expert's hidden size", cxxopts::value<int64_t>()->default_value("512"))(
      "experts", "experts", cxxopts::value<int64_t>()->default_value("16"))(
      "top-k", "experts per token", cxxopts::value<int64_t>()->default_value("2"))(
      "iters", "timed iterations", cxxopts::value<int>()->default_value("10"))(
      "warmup", "untimed iterations first", cxxopts::value<int>()->default_value("2"))(
      "threads", "intra-op threads (0: libtorch's default)", cxxopts::value<int>()->default_value("0"))("help", "this text");
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megacpp-bench-moe: %s\n", e.what());
    return 2;
  }
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (args["threads"].as<int>() > 0) torch::set_num_threads(args["threads"].as<int>());
  const MoeShape shape{args["hidden"].as<int64_t>(), args["ffn"].as<int64_t>(), args["experts"].as<int64_t>(),
                       args["top-k"].as<int64_t>(), true};
  const int64_t tokens = args["tokens"].as<int64_t>();
  torch::manual_seed(0);
  auto block = std::make_shared<SparseMoeBlock>(shape, torch::TensorOptions());
  {
    torch::NoGradGuard no_grad;
    for (auto& p : block->parameters()) p.normal_(0.0, 0.05);
  }
  const at::Tensor x = torch::randn({tokens, shape.hidden_size}).requires_grad_(true);
  const double diff = ((*block)(x) - masked_dense(*block, shape, x)).abs().max().item<double>();

  const int warmup = args["warmup"].as<int>(), iters = args["iters"].as<int>();
  const double grouped = time_ms([&](const at::Tensor& in) { return (*block)(in); }, *block, x, warmup, iters);
  const double dense = time_ms([&](const at::Tensor& in) { return masked_dense(*block, shape, in); }, *block, x, warmup, iters);
  std::printf("moe layer: %lld tokens, hidden %lld, %lld experts of %lld, top-%lld, %d threads, fp32, forward + backward\n",
              static_cast<long long>(tokens), static_cast<long long>(shape.hidden_size),
              static_cast<long long>(shape.num_experts), static_cast<long long>(shape.ffn_hidden_size),
              static_cast<long long>(shape.top_k), torch::get_num_threads());
  std::printf("same outputs: max |grouped - masked dense| = %.3g\n", diff);
  if (!(diff <= 1e-4)) {
    std::fprintf(stderr, "megacpp-bench-moe: the two forms disagree (%.3g > 1e-4): not timing them\n", diff);
    return 1;
  }
  std::printf("grouped per expert: %8.1f ms  %10.0f tokens/s\n", grouped, tokens / (grouped / 1000.0));
  std::printf("masked dense:       %8.1f ms  %10.0f tokens/s\n", dense, tokens / (dense / 1000.0));
  std::printf("speed-up of grouped: %.2fx (top-k / experts = %.3f of the dense FLOPs)\n", dense / grouped,
              static_cast<double>(shape.top_k) / static_cast<double>(shape.num_experts));
  return 0;
}
