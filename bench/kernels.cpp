// megacpp-bench-kernels: each fused CPU kernel (Note [Fused kernels] in models/kernels/fusion.h)
// against libtorch's composition of the same formula, forward + backward, at the shapes of one
// micro-batch of the benchmark's Llama (bench/bench.py: hidden 256, 4 heads, FFN 688, vocabulary
// 8192, 5.26 M parameters for AdamW, also with clipping), fused and composed runs interleaved;
// prints the median ms of each and their range, and the ratio.
//
//   megacpp-bench-kernels [--seq 256] [--repeats 30] [--threads 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <cxxopts.hpp>
#include <torch/torch.h>

#include "models/kernels/cross_entropy_kernel.h"
#include "models/kernels/flash_attention.h"
#include "models/kernels/rms_norm_kernel.h"
#include "models/kernels/rotary_kernel.h"
#include "models/kernels/swiglu_kernel.h"
#include "parallel/compat.h"
#include "training/optim/fused_adamw.h"

namespace {

using Pass = std::function<void()>;

double milliseconds(const Pass& pass) {
  const auto start = std::chrono::steady_clock::now();
  pass();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string spread(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  char text[96];
  std::snprintf(text, sizeof text, "%8.3f (%.3f-%.3f)", ms[ms.size() / 2], ms.front(), ms.back());
  return text;
}

// Forward and backward of f over fresh leaves of `inputs`, with a ones upstream gradient.
Pass forward_backward(std::function<at::Tensor(const std::vector<at::Tensor>&)> f, std::vector<at::Tensor> inputs) {
  return [f = std::move(f), inputs = std::move(inputs)] {
    std::vector<at::Tensor> leaves;
    for (const auto& x : inputs) leaves.push_back(x.detach().requires_grad_(true));
    f(leaves).sum().backward();
  };
}

void compare(const std::string& name, const Pass& fused, const Pass& composed, int repeats) {
  fused();
  composed();  // warm-up
  std::vector<double> a, b;
  for (int r = 0; r < repeats; ++r) {
    a.push_back(milliseconds(fused));
    b.push_back(milliseconds(composed));
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::printf("%-14s %s %s %6.2f\n", name.c_str(), spread(a).c_str(), spread(b).c_str(), a[a.size() / 2] / b[b.size() / 2]);
}

// AdamW steps over the benchmark model's parameter count, fused (FusedAdamW) or torch's. With
// `clip`, each step first clips the gradients by that coefficient: FusedAdamW in its pass,
// torch's AdamW after an in-place scaling, as the trainer does for each.
Pass adamw_steps(bool fused, int64_t parameters, double clip = 1.0) {
  auto param = std::make_shared<at::Tensor>(torch::randn({parameters}).requires_grad_(true));
  param->mutable_grad() = torch::randn({parameters});
  std::vector<torch::optim::OptimizerParamGroup> groups{torch::optim::OptimizerParamGroup({*param})};
  const auto options = torch::optim::AdamWOptions(1e-4).weight_decay(0.01);
  std::shared_ptr<torch::optim::AdamW> optimizer;
  if (fused) {
    optimizer = std::make_shared<megacpp::training::optim::FusedAdamW>(groups, options);
  } else {
    optimizer = std::make_shared<torch::optim::AdamW>(groups, options);
  }
  if (clip == 1.0) return [param, optimizer] { optimizer->step(); };
  if (fused) {
    return [param, optimizer, clip] {
      static_cast<megacpp::training::optim::FusedAdamW&>(*optimizer).scale_gradients(clip);
      optimizer->step();
    };
  }
  return [param, optimizer, clip] {
    param->grad().mul_(clip);
    optimizer->step();
  };
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("megacpp-bench-kernels", "fused CPU kernels against libtorch's composition, forward + backward");
  options.add_options()("seq", "tokens of the micro-batch", cxxopts::value<int64_t>()->default_value("256"))(
      "repeats", "interleaved runs of each", cxxopts::value<int>()->default_value("30"))(
      "threads", "intra-op threads", cxxopts::value<int>()->default_value("1"));
  const auto flags = options.parse(argc, argv);
  const int64_t seq = flags["seq"].as<int64_t>(), hidden = 256, heads = 4, dim = 64, ffn = 688, vocab = 8192;
  const int repeats = flags["repeats"].as<int>();
  torch::set_num_threads(flags["threads"].as<int>());
  torch::manual_seed(0);
  std::printf("megacpp-bench-kernels: seq %lld, libtorch %s, %d threads, %d interleaved runs; ms: median (min-max)\n",
              static_cast<long long>(seq), TORCH_VERSION, torch::get_num_threads(), repeats);
  std::printf("%-14s %-26s %-26s %6s\n", "kernel", "fused ms", "composed ms", "ratio");

  const at::Tensor x = torch::randn({1, seq, hidden}), weight = torch::rand({hidden}) + 0.5;
  compare("RMSNorm", forward_backward([](const auto& in) { return megacpp::models::kernels::fused_rms_norm(in[0], in[1], 1e-6, false); }, {x, weight}),
          forward_backward([](const auto& in) { return in[1] * (in[0] * torch::rsqrt(in[0].pow(2).mean(-1, true) + 1e-6)); }, {x, weight}),
          repeats);

  const at::Tensor q = torch::randn({1, seq, heads, dim}).transpose(1, 2);
  const at::Tensor angles = torch::outer(torch::arange(seq, torch::kFloat), torch::rand({dim / 2}));
  const at::Tensor cos = torch::cat({angles, angles}, -1).cos(), sin = torch::cat({angles, angles}, -1).sin();
  compare("rotary", forward_backward([&](const auto& in) { return megacpp::models::kernels::fused_rotary(in[0], cos, sin); }, {q}),
          forward_backward(
              [&](const auto& in) {
                const at::Tensor rotated = torch::cat({-in[0].narrow(-1, dim / 2, dim / 2), in[0].narrow(-1, 0, dim / 2)}, -1);
                return in[0] * cos + rotated * sin;
              },
              {q}),
          repeats);

  const at::Tensor gate = torch::randn({1, seq, ffn}), up = torch::randn({1, seq, ffn});
  compare("SwiGLU", forward_backward([](const auto& in) { return megacpp::models::kernels::fused_swiglu(in[0], in[1]); }, {gate, up}),
          forward_backward([](const auto& in) { return torch::silu(in[0]) * in[1]; }, {gate, up}), repeats);

  const at::Tensor logits = torch::randn({seq, vocab}), labels = torch::randint(vocab, {seq}, torch::kLong);
  compare("cross-entropy",
          forward_backward([&](const auto& in) { return megacpp::models::kernels::fused_cross_entropy(in[0], labels); }, {logits}),
          forward_backward([&](const auto& in) { return torch::cross_entropy_loss(in[0], labels, {}, at::Reduction::None); }, {logits}),
          repeats);

  const at::Tensor k = torch::randn({1, heads, seq, dim}), v = torch::randn({1, heads, seq, dim}), qc = q.contiguous();
  compare("attention",
          forward_backward([](const auto& in) { return megacpp::models::kernels::fused_causal_attention(in[0], in[1], in[2], {}, 0); },
                           {qc, k, v}),
          forward_backward([](const auto& in) { return megacpp::parallel::compat::causal_attention(in[0], in[1], in[2]); }, {qc, k, v}),
          repeats);

  const int64_t parameters = 5261568;  // the benchmark model's
  compare("AdamW", adamw_steps(true, parameters), adamw_steps(false, parameters), repeats);
  const double clip = 0.999;  // near 1, so that the composed side's repeated in-place scaling stays normal
  compare("AdamW clipped", adamw_steps(true, parameters, clip), adamw_steps(false, parameters, clip), repeats);
  return 0;
}
