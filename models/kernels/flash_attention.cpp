#include "models/kernels/flash_attention.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace megacpp::models::kernels {
namespace {

constexpr int64_t kAttentionBlock = 128;  // queries and keys per block

// One block of queries [q0, q0 + nq) against one of keys [k0, k0 + nk).
struct BlockPair {
  int64_t q0, nq, k0, nk;
};

// What the mask leaves of a block pair: nothing (skip it), all of it (undefined mask) or the
// bool mask [batch or 1, 1, nq, nk] of hidden keys.
struct BlockMask {
  bool skip = false;
  at::Tensor hidden;
};

BlockMask block_mask(const BlockPair& b, const at::Tensor& documents, int64_t window, const at::TensorOptions& options) {
  const int64_t last_q = b.q0 + b.nq - 1, last_k = b.k0 + b.nk - 1;
  if (b.k0 > last_q || (window > 0 && b.q0 - last_k >= window)) return {true, {}};
  const bool causal = last_k > b.q0, windowed = window > 0 && last_q - b.k0 >= window;
  const bool packed = documents.numel() > 0;  // empty: one document
  if (!causal && !windowed && !packed) return {};
  const auto longs = options.dtype(torch::kLong);
  const at::Tensor qpos = torch::arange(b.q0, b.q0 + b.nq, longs).unsqueeze(1), kpos = torch::arange(b.k0, b.k0 + b.nk, longs).unsqueeze(0);
  at::Tensor hidden = kpos.gt(qpos);
  if (windowed) hidden = hidden.logical_or((qpos - kpos).ge(window));
  hidden = hidden.view({1, 1, b.nq, b.nk});
  if (packed) {
    const at::Tensor dq = documents.narrow(1, b.q0, b.nq).unsqueeze(2), dk = documents.narrow(1, b.k0, b.nk).unsqueeze(1);
    hidden = hidden.logical_or(dq.ne(dk).unsqueeze(1));
  }
  return {false, hidden};
}

// The fp32 scores of a block pair, hidden keys at -inf.
at::Tensor block_scores(const at::Tensor& q, const at::Tensor& k, const BlockPair& b, const BlockMask& mask, double scale) {
  at::Tensor s = torch::matmul(q.narrow(2, b.q0, b.nq), k.narrow(2, b.k0, b.nk).transpose(-2, -1)).to(torch::kFloat).mul_(scale);
  if (mask.hidden.defined()) s.masked_fill_(mask.hidden, -std::numeric_limits<float>::infinity());
  return s;
}


struct FlashAttentionFunction : torch::autograd::Function<FlashAttentionFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& documents, int64_t window) {
    const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), dim = q.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    const auto f32 = q.options().dtype(torch::kFloat);
    at::Tensor out = torch::empty({batch, heads, seq, dim}, q.options());
    at::Tensor lse = torch::empty({batch, heads, seq}, f32);
    for (int64_t q0 = 0; q0 < seq; q0 += kAttentionBlock) {
      const int64_t nq = std::min(kAttentionBlock, seq - q0);
      at::Tensor top = torch::full({batch, heads, nq}, -std::numeric_limits<float>::infinity(), f32);
      at::Tensor sum = torch::zeros({batch, heads, nq}, f32), acc = torch::zeros({batch, heads, nq, dim}, f32);
      for (int64_t k0 = 0; k0 < seq; k0 += kAttentionBlock) {
        const BlockPair b{q0, nq, k0, std::min(kAttentionBlock, seq - k0)};
        const BlockMask mask = block_mask(b, documents, window, q.options());
        if (mask.skip) continue;
        const at::Tensor s = block_scores(q, k, b, mask, scale);
        const at::Tensor new_top = torch::maximum(top, std::get<0>(s.max(-1)));
        // A row with no visible key yet keeps -inf: shift it by 0 so that exp gives 0, not NaN.
        const at::Tensor shift = new_top.masked_fill(new_top.isinf(), 0.0);
        const at::Tensor p = (s - shift.unsqueeze(-1)).exp_();
        const at::Tensor rescale = (top - shift).exp_();
        sum = sum.mul_(rescale).add_(p.sum(-1));
        acc = acc.mul_(rescale.unsqueeze(-1)).add_(torch::matmul(p.to(v.scalar_type()), v.narrow(2, b.k0, b.nk)).to(torch::kFloat));
        top = new_top;
      }
      out.narrow(2, q0, nq).copy_(acc / sum.unsqueeze(-1));
      lse.narrow(2, q0, nq).copy_(top + sum.log());
    }
    ctx->save_for_backward({q, k, v, out, lse, documents});
    ctx->saved_data["window"] = window;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4], &documents = saved[5];
    const int64_t window = ctx->saved_data["window"].toInt(), seq = q.size(2);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
    const at::Tensor dout = grads[0].to(q.scalar_type());
    const at::Tensor delta = (dout.to(torch::kFloat) * out.to(torch::kFloat)).sum(-1);  // rowsum(dO * O)
    const auto f32 = q.options().dtype(torch::kFloat);
    at::Tensor dq = torch::zeros(q.sizes(), f32), dk = torch::zeros(k.sizes(), f32), dv = torch::zeros(v.sizes(), f32);
    for (int64_t k0 = 0; k0 < seq; k0 += kAttentionBlock) {
      for (int64_t q0 = 0; q0 < seq; q0 += kAttentionBlock) {
        const BlockPair b{q0, std::min(kAttentionBlock, seq - q0), k0, std::min(kAttentionBlock, seq - k0)};
        const BlockMask mask = block_mask(b, documents, window, q.options());
        if (mask.skip) continue;
        const at::Tensor p = (block_scores(q, k, b, mask, scale) - lse.narrow(2, b.q0, b.nq).unsqueeze(-1)).exp_();
        const at::Tensor dout_block = dout.narrow(2, b.q0, b.nq);
        dv.narrow(2, b.k0, b.nk).add_(torch::matmul(p.to(q.scalar_type()).transpose(-2, -1), dout_block).to(torch::kFloat));
        const at::Tensor dp = torch::matmul(dout_block, v.narrow(2, b.k0, b.nk).transpose(-2, -1)).to(torch::kFloat);
        const at::Tensor ds = p.mul_(dp.sub_(delta.narrow(2, b.q0, b.nq).unsqueeze(-1))).mul_(scale).to(q.scalar_type());
        dq.narrow(2, b.q0, b.nq).add_(torch::matmul(ds, k.narrow(2, b.k0, b.nk)).to(torch::kFloat));
        dk.narrow(2, b.k0, b.nk).add_(torch::matmul(ds.transpose(-2, -1), q.narrow(2, b.q0, b.nq)).to(torch::kFloat));
      }
    }
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& documents,
                                  int64_t sliding_window) {
  TORCH_CHECK(q.dim() == 4 && q.sizes() == k.sizes() && q.sizes() == v.sizes(),
              "fused_causal_attention: q, k, v of one shape [batch, heads, seq, head_dim] expected, got ", q.sizes(), ", ",
              k.sizes(), ", ", v.sizes());
  TORCH_CHECK(!documents.defined() || (documents.dim() == 2 && documents.size(0) == q.size(0) && documents.size(1) == q.size(2)),
              "fused_causal_attention: documents [", q.size(0), ", ", q.size(2), "] expected, got ", documents.sizes());
  // An autograd function's tensor arguments must be defined (libtorch 1.13): no documents is an empty one.
  return FlashAttentionFunction::apply(q, k, v, documents.defined() ? documents : torch::empty({0}, q.options().dtype(torch::kLong)),
                                       sliding_window);
}

}  // namespace megacpp::models::kernels
