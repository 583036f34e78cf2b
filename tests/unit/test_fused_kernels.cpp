// The fused CPU kernels (Note [Fused kernels] in models/kernels/fusion.h) against libtorch's
// composition of the same formula: values and gradients, fp32 within 1e-5 and bf16 within 1e-2
// (of the largest magnitude), at odd sizes (rows and blocks that do not divide), strided inputs,
// per-sample positions as packed documents give them, the ignore index, and NaN kept NaN; the
// blocked attention with packed documents' masks, a sliding window and GQA; bf16 and half
// Linear layers as fp32 products. AdamW
// against torch::optim::AdamW over several steps, with the state checkpoints read.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "models/kernels/cross_entropy_kernel.h"
#include "models/kernels/flash_attention.h"
#include "models/kernels/fusion.h"
#include "models/kernels/linear_kernel.h"
#include "models/kernels/rms_norm_kernel.h"
#include "models/kernels/swiglu_kernel.h"
#include "models/kernels/vector_math.h"
#include "models/layers/attention.h"
#include "models/layers/rms_norm.h"
#include "models/layers/rotary.h"
#include "parallel/compat.h"
#include "training/optim/fused_adamw.h"

namespace megacpp {
namespace {

using models::kernels::KernelFusion;

// The kernels on or off for one scope.
class FusionScope {
 public:
  explicit FusionScope(bool on) : saved_(models::kernels::kernel_fusion()) {
    models::kernels::set_kernel_fusion(on ? KernelFusion{} : KernelFusion{false, false, false, false, false, false});
  }
  ~FusionScope() { models::kernels::set_kernel_fusion(saved_); }

 private:
  KernelFusion saved_;
};

double tolerance(c10::ScalarType type) { return type == torch::kFloat ? 1e-5 : 1e-2; }

void expect_close(const at::Tensor& fused, const at::Tensor& composed, c10::ScalarType type, const std::string& what) {
  ASSERT_EQ(fused.sizes(), composed.sizes()) << what;
  const at::Tensor a = fused.to(torch::kDouble), b = composed.to(torch::kDouble);
  const double scale = std::max(1.0, b.abs().max().item<double>());
  EXPECT_LE((a - b).abs().max().item<double>(), tolerance(type) * scale) << what << " (" << c10::toString(type) << ")";
}

// The output and the gradients of `inputs` of f under a fixed random upstream gradient.
std::vector<at::Tensor> value_and_gradients(const std::function<at::Tensor(const std::vector<at::Tensor>&)>& f,
                                            const std::vector<at::Tensor>& inputs, int64_t seed) {
  std::vector<at::Tensor> leaves;
  for (const auto& x : inputs) leaves.push_back(x.detach().clone().requires_grad_(true));
  const at::Tensor out = f(leaves);
  torch::manual_seed(seed);
  const at::Tensor upstream = torch::randn(out.sizes(), out.options().dtype(torch::kFloat)).to(out.scalar_type());
  out.backward(upstream);
  std::vector<at::Tensor> result{out.detach()};
  for (const auto& leaf : leaves) result.push_back(leaf.grad());
  return result;
}

void expect_same_pass(const std::vector<at::Tensor>& fused, const std::vector<at::Tensor>& composed, c10::ScalarType type,
                      const std::string& what) {
  ASSERT_EQ(fused.size(), composed.size());
  expect_close(fused[0], composed[0], type, what + ": value");
  for (size_t i = 1; i < fused.size(); ++i) expect_close(fused[i], composed[i], type, what + ": gradient " + std::to_string(i - 1));
}

const c10::ScalarType kTypes[] = {torch::kFloat, torch::kBFloat16};

TEST(FusedKernels, ExpIsLibmsWithinAFewUlpAndKeepsNan) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    worst = std::max(worst, std::abs(models::kernels::exp_approx(x) / std::exp(static_cast<double>(x)) - 1));
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(models::kernels::exp_approx(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(models::kernels::exp_approx(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FusedKernels, RmsNormIsTheCompositionInValuesAndGradients) {
  for (const auto type : kTypes) {
    for (const bool zero_centered : {false, true}) {
      for (const int64_t dim : {37, 256}) {
        models::RMSNorm norm(dim, 1e-6, torch::TensorOptions().dtype(type), zero_centered);
        torch::manual_seed(1);
        for (auto& p : norm.parameters()) {
          torch::NoGradGuard no_grad;
          p.copy_(torch::randn(p.sizes()) * 0.5 + 1);
        }
        const at::Tensor x = (torch::randn({3, 5, dim}) * 3).to(type);
        // Also a strided view of it, as sequence parallelism's reduce-scatter gives (rows not in memory order).
        for (const bool strided : {false, true}) {
          const auto pass = [&](bool fused) {
            FusionScope scope(fused);
            for (auto& p : norm.parameters()) p.mutable_grad() = at::Tensor();
            auto result = value_and_gradients(
                [&](const std::vector<at::Tensor>& in) { return norm(strided ? in[0].transpose(0, 1) : in[0]); }, {x}, 7);
            result.push_back(norm.parameters()[0].grad().clone());
            return result;
          };
          expect_same_pass(pass(true), pass(false), type,
                           "RMSNorm dim " + std::to_string(dim) + (zero_centered ? " 1p" : "") + (strided ? " strided" : ""));
        }
      }
    }
  }
}

// bf16 and half: the fp32 products rounded once, as the composition through fp32 computes them,
// and within bf16's rounding of libtorch's own GEMM in bf16; with a frozen weight and no bias,
// the input's gradient.
TEST(FusedKernels, LowPrecisionLinearIsTheFp32ProductRoundedOnce) {
  for (const auto type : {torch::kBFloat16, torch::kHalf}) {
    torch::manual_seed(4);
    const at::Tensor x = torch::randn({2, 5, 33}).to(type), w = (torch::randn({17, 33}) / 4).to(type), b = torch::randn({17}).to(type);
    const auto fused = value_and_gradients([](const auto& in) { return models::kernels::linear(in[0], in[1], in[2]); }, {x, w, b}, 5);
    const auto through_fp32 = value_and_gradients(
        [type](const auto& in) { return torch::linear(in[0].to(torch::kFloat), in[1].to(torch::kFloat), in[2].to(torch::kFloat)).to(type); },
        {x, w, b}, 5);
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_EQ(fused[i].scalar_type(), type);
      EXPECT_LE((fused[i].to(torch::kFloat) - through_fp32[i].to(torch::kFloat)).abs().max().item<double>(),
                std::ldexp(through_fp32[i].to(torch::kFloat).abs().max().item<double>(), type == torch::kHalf ? -10 : -7))
          << "output " << i << " is the fp32 product rounded once (" << c10::toString(type) << ")";
    }
    if (type == torch::kBFloat16) {  // libtorch 1.13 has no GEMM in half on the CPU
      const auto in_type = value_and_gradients([](const auto& in) { return torch::linear(in[0], in[1], in[2]); }, {x, w, b}, 5);
      expect_same_pass(fused, in_type, type, "linear against libtorch's GEMM in bf16");
    }
    // A frozen weight and no bias: the input's gradient alone, the fp32 product rounded once.
    const at::Tensor input = x.detach().clone().requires_grad_(true);
    models::kernels::linear(input, w, {}).to(torch::kFloat).sum().backward();
    const at::Tensor expected = torch::ones({10, 17}).mm(w.to(torch::kFloat)).to(type).reshape(x.sizes());
    EXPECT_TRUE(torch::equal(input.grad(), expected)) << c10::toString(type);
  }
}

TEST(FusedKernels, SwigluIsTheCompositionInValuesAndGradients) {
  for (const auto type : kTypes) {
    for (const auto& shape : {std::vector<int64_t>{7, 333}, std::vector<int64_t>{3, 5001}}) {  // blocks of 4096 do not divide
      torch::manual_seed(2);
      const at::Tensor gate = (torch::randn(shape) * 4).to(type), up = torch::randn(shape).to(type);
      const auto fused = value_and_gradients([](const auto& in) { return models::kernels::fused_swiglu(in[0], in[1]); }, {gate, up}, 3);
      const auto composed = value_and_gradients([](const auto& in) { return torch::silu(in[0]) * in[1]; }, {gate, up}, 3);
      expect_same_pass(fused, composed, type, "SwiGLU " + std::to_string(shape[1]));
    }
  }
}

TEST(FusedKernels, RotaryIsTheCompositionOnStridedInputsAndPackedPositions) {
  const models::RotaryEmbedding rotary(10, 10000.0);
  for (const auto type : kTypes) {
    torch::manual_seed(4);
    // As a projection makes it: [batch, seq, heads, dim] seen as [batch, heads, seq, dim].
    const at::Tensor x = torch::randn({2, 13, 3, 10}).to(type).transpose(1, 2);
    ASSERT_FALSE(x.is_contiguous());
    // Two packed documents in sample 0 (positions restart at 5), one in sample 1.
    const at::Tensor packed = torch::cat({torch::arange(5), torch::arange(8)}).unsqueeze(0);
    const at::Tensor positions = torch::cat({packed, torch::arange(13).unsqueeze(0)});
    for (const bool per_sample : {false, true}) {
      const auto pass = [&](bool fused) {
        FusionScope scope(fused);
        return value_and_gradients(
            [&](const auto& in) { return rotary.apply(in[0], per_sample ? positions : at::Tensor()); }, {x}, 5);
      };
      expect_same_pass(pass(true), pass(false), type, per_sample ? "rotary, packed positions" : "rotary");
    }
  }
}

TEST(FusedKernels, CrossEntropyIsTheCompositionWithTheIgnoreIndexAndNan) {
  for (const auto type : kTypes) {
    for (const int64_t vocab : {1001, 8192}) {
      torch::manual_seed(6);
      const at::Tensor logits = (torch::randn({9, vocab}) * 5).to(type);
      at::Tensor labels = torch::randint(vocab, {9}, torch::kLong);
      labels[4] = -100;
      const auto fused =
          value_and_gradients([&](const auto& in) { return models::kernels::fused_cross_entropy(in[0], labels); }, {logits}, 8);
      const auto composed = value_and_gradients(
          [&](const auto& in) { return torch::cross_entropy_loss(in[0].to(torch::kFloat), labels, {}, at::Reduction::None); }, {logits}, 8);
      expect_same_pass(fused, composed, type, "cross-entropy, vocabulary " + std::to_string(vocab));
      EXPECT_EQ(fused[0][4].item<float>(), 0.0f);
      EXPECT_EQ(fused[1][4].abs().max().item<float>(), 0.0f) << "an ignored label has no gradient";
    }
  }
  at::Tensor logits = torch::randn({2, 50});
  logits[1][7] = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor losses = models::kernels::fused_cross_entropy(logits, torch::tensor({3, 3}));
  EXPECT_FALSE(std::isnan(losses[0].item<float>()));
  EXPECT_TRUE(std::isnan(losses[1].item<float>())) << "a NaN logit makes its row's loss NaN, as the NaN guard expects";
  try {
    models::kernels::fused_cross_entropy(torch::randn({3, 50}), torch::tensor({1, 50, 2}));
    ADD_FAILURE() << "a label outside the vocabulary was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 50 of row 1 is outside the vocabulary [0, 50)"), std::string::npos) << e.what();
  }
}

// softmax(q k^T / sqrt(d) + mask) v with the whole [seq, seq] mask, as the layers composed it.
at::Tensor composed_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& documents, int64_t window) {
  const int64_t seq = q.size(2);
  const at::Tensor i = torch::arange(seq).unsqueeze(1), j = torch::arange(seq).unsqueeze(0);
  at::Tensor hidden = j.gt(i).view({1, 1, seq, seq});
  if (window > 0) hidden = hidden.logical_or((i - j).ge(window).view({1, 1, seq, seq}));
  if (documents.defined()) hidden = hidden.logical_or(documents.unsqueeze(2).ne(documents.unsqueeze(1)).unsqueeze(1));
  const at::Tensor scores = torch::matmul(q, k.transpose(-2, -1)).to(torch::kFloat) / std::sqrt(static_cast<double>(q.size(3)));
  const at::Tensor probs = torch::softmax(scores.masked_fill(hidden, -std::numeric_limits<float>::infinity()), -1);
  return torch::matmul(probs.to(v.scalar_type()), v);
}

TEST(FusedKernels, BlockedAttentionIsTheCompositionWithPackedDocumentsAndWindows) {
  // Sample 0 packs three documents (boundaries inside and between blocks of 128), sample 1 one.
  const at::Tensor packed = torch::cat({torch::zeros({100}), torch::ones({150}), torch::full({50}, 2)}).to(torch::kLong).unsqueeze(0);
  const at::Tensor documents = torch::cat({packed, torch::zeros({1, 300}, torch::kLong)});
  for (const auto type : kTypes) {
    torch::manual_seed(10);
    const at::Tensor q = torch::randn({2, 3, 300, 16}).to(type), k = torch::randn({2, 3, 300, 16}).to(type);
    const at::Tensor v = torch::randn({2, 3, 300, 16}).to(type);
    for (const bool packed_documents : {false, true}) {
      for (const int64_t window : {int64_t{0}, int64_t{70}}) {
        const at::Tensor docs = packed_documents ? documents : at::Tensor();
        const auto fused = value_and_gradients(
            [&](const auto& in) { return models::kernels::fused_causal_attention(in[0], in[1], in[2], docs, window); }, {q, k, v}, 11);
        const auto composed =
            value_and_gradients([&](const auto& in) { return composed_attention(in[0], in[1], in[2], docs, window); }, {q, k, v}, 11);
        const std::string what = std::string("attention") + (packed_documents ? ", packed documents" : "") + (window ? ", window 70" : "");
        if (type == torch::kFloat) {
          expect_same_pass(fused, composed, type, what);
          continue;
        }
        // bf16: each rounds differently (libtorch's bf16 matmul accumulates differently on AVX2 and
        // AVX-512 CPUs), so both are held to the exact result from the same bf16 inputs, and the
        // fused kernel may be off by at most the composition's error plus the bf16 tolerance.
        const auto exact = value_and_gradients([&](const auto& in) { return composed_attention(in[0], in[1], in[2], docs, window); },
                                               {q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble)}, 11);
        for (size_t i = 0; i < exact.size(); ++i) {
          auto error = [&](const at::Tensor& t) { return (t.to(torch::kDouble) - exact[i]).abs().max().item<double>(); };
          const double scale = std::max(1.0, exact[i].abs().max().item<double>());
          EXPECT_LE(error(fused[i]), error(composed[i]) + tolerance(type) * scale) << what << ": output or gradient " << i;
        }
      }
    }
  }
}

TEST(FusedKernels, AttentionLayersWithGroupedQueriesAreTheComposition) {
  models::AttentionShape shape;
  shape.hidden_size = 48, shape.heads = 6, shape.kv_heads = 2, shape.head_dim = 8;
  torch::manual_seed(12);
  models::Attention attention(shape, torch::TensorOptions().dtype(torch::kFloat));
  for (auto& p : attention.parameters()) {
    torch::NoGradGuard no_grad;
    p.copy_(torch::randn(p.sizes()) * 0.2);
  }
  // Long enough for the layers to take the blocked attention on libtorch 1.13.
  const at::Tensor hidden = torch::randn({2, models::kernels::kBlockedAttentionFromSeq + 7, 48});
  const auto pass = [&](bool fused) {
    FusionScope scope(fused);
    for (auto& p : attention.parameters()) p.mutable_grad() = at::Tensor();
    auto result = value_and_gradients([&](const auto& in) { return attention(in[0]); }, {hidden}, 13);
    for (auto& p : attention.parameters()) result.push_back(p.grad().clone());
    return result;
  };
  expect_same_pass(pass(true), pass(false), torch::kFloat, "attention, 6 query heads in 2 groups");
}

// Five steps of FusedAdamW and of torch::optim::AdamW from the same parameters and gradients:
// the same parameters and state after them. `clipped`: FusedAdamW is told to scale each step's
// gradients by a clipping coefficient and torch's AdamW gets them scaled beforehand; the
// coefficient changes from step to step, since Adam's update hardly sees a constant one.
void expect_adamw_steps_as_torchs(const std::vector<at::Tensor>& shapes, const std::string& what, bool clipped = false) {
  const double coefficients[] = {0.25, 0.9, 0.05, 0.5, 0.3};
  const auto make = [&](bool fused, std::vector<at::Tensor>& params) -> std::unique_ptr<torch::optim::AdamW> {
    for (const auto& s : shapes) params.push_back(s.clone().requires_grad_(true));
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<at::Tensor>{params[0], params[1]});
    auto no_decay = std::make_unique<torch::optim::AdamWOptions>(3e-2);
    no_decay->weight_decay(0.0);
    groups.emplace_back(std::vector<at::Tensor>{params[2]}, std::move(no_decay));
    const auto options = torch::optim::AdamWOptions(3e-2).betas({0.9, 0.95}).weight_decay(0.1).eps(1e-8);
    if (fused) return std::make_unique<training::optim::FusedAdamW>(std::move(groups), options);
    return std::make_unique<torch::optim::AdamW>(std::move(groups), options);
  };
  std::vector<at::Tensor> fused_params, reference_params;
  auto fused = make(true, fused_params);
  auto reference = make(false, reference_params);
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const at::Tensor grad = torch::randn(shapes[i].sizes()).to(shapes[i].scalar_type());
      fused_params[i].mutable_grad() = grad.clone();
      reference_params[i].mutable_grad() = clipped ? grad * coefficients[step] : grad.clone();
    }
    if (clipped) static_cast<training::optim::FusedAdamW&>(*fused).scale_gradients(coefficients[step]);
    fused->step();
    reference->step();
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto type = shapes[i].scalar_type();
    const std::string name = what + ", parameter " + std::to_string(i);
    expect_close(fused_params[i], reference_params[i], type, name);
    auto& a = static_cast<torch::optim::AdamWParamState&>(*fused->state().at(parallel::compat::optimizer_state_key(fused_params[i])));
    auto& b = static_cast<torch::optim::AdamWParamState&>(*reference->state().at(parallel::compat::optimizer_state_key(reference_params[i])));
    EXPECT_EQ(a.step(), b.step()) << name;
    expect_close(a.exp_avg(), b.exp_avg(), type, name + ": exp_avg");
    expect_close(a.exp_avg_sq(), b.exp_avg_sq(), type, name + ": exp_avg_sq");
  }
}

TEST(FusedKernels, AdamWStepsAsTorchsAdamWAndKeepsItsState) {
  torch::manual_seed(9);
  // fp32 parameters: the one pass; with a bf16 one, the optimizer steps as torch's altogether.
  expect_adamw_steps_as_torchs({torch::randn({33, 17}), torch::randn({70001}), torch::randn({5})}, "fp32");
  expect_adamw_steps_as_torchs({torch::randn({33, 17}), torch::randn({70001}), torch::randn({5}).to(torch::kBFloat16)}, "with bf16");
  // Clipping inside the pass, and scaling in place before the base class's step.
  expect_adamw_steps_as_torchs({torch::randn({33, 17}), torch::randn({70001}), torch::randn({5})}, "fp32, clipped", true);
  expect_adamw_steps_as_torchs({torch::randn({33, 17}), torch::randn({70001}), torch::randn({5}).to(torch::kBFloat16)},
                               "with bf16, clipped", true);
}

}  // namespace
}  // namespace megacpp
