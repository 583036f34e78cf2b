#include "parallel/compat.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace megacpp::parallel::compat {

namespace {

template <typename Options, typename = void>
struct HasLibUVSwitch : std::false_type {};
template <typename Options>
struct HasLibUVSwitch<Options, std::void_t<decltype(std::declval<Options&>().useLibUV)>> : std::true_type {};

template <typename Options>
bool use_libuv(Options& options, std::optional<bool> value = std::nullopt) {
  if constexpr (HasLibUVSwitch<Options>::value) {
    if (value) options.useLibUV = *value;
    return options.useLibUV;
  }
  return false;
}

#if TORCH_VERSION_MAJOR < 2
// Query rows per block of the chunked attention: scores of one block against the keys up to
// its end are [block, end] instead of [seq, seq], and the keys past the block are never
// multiplied. This bounds the attention's temporaries; on this machine it is no faster than one
// masked pass (docs/performance.md).
constexpr int64_t kQueryBlock = 256;

at::Tensor chunked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
                                    const at::Tensor& visible) {
  const int64_t seq = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const at::Tensor positions = torch::arange(seq, q.options().dtype(torch::kLong));
  const auto softmax_type = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;  // fp32 or wider
  std::vector<at::Tensor> blocks;
  for (int64_t start = 0; start < seq; start += kQueryBlock) {
    const int64_t end = std::min(seq, start + kQueryBlock);
    const at::Tensor keys = k.narrow(-2, 0, end), values = v.narrow(-2, 0, end);
    at::Tensor scores = torch::matmul(q.narrow(-2, start, end - start), keys.transpose(-2, -1)).mul_(scale);
    // Key j is hidden from query i when j > i: only the block's diagonal part has any.
    at::Tensor hidden = positions.narrow(0, 0, end).unsqueeze(0) > positions.narrow(0, start, end - start).unsqueeze(1);
    if (visible.defined()) hidden = hidden.logical_or(visible.narrow(-2, start, end - start).narrow(-1, 0, end).logical_not());
    scores.masked_fill_(hidden, -std::numeric_limits<float>::infinity());
    at::Tensor probs = torch::softmax(scores, -1, softmax_type).to(q.scalar_type());
    if (dropout_p > 0) probs = torch::dropout(probs, dropout_p, /*train=*/true);
    blocks.push_back(torch::matmul(probs, values));
  }
  return blocks.size() == 1 ? blocks[0] : torch::cat(blocks, -2);
}
#endif

}  // namespace

c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(const std::string& host, c10d::TCPStoreOptions options) {
  const char* switch_ = std::getenv("USE_LIBUV");
  if (switch_ && std::string(switch_) == "0") use_libuv(options, false);
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const c10::Error& e) {
    if (!use_libuv(options) || std::string(e.what()).find("libuv") == std::string::npos) throw;
    use_libuv(options, false);
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  }
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
                            const at::Tensor& visible) {
#if TORCH_VERSION_MAJOR >= 2
  if (!visible.defined()) return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout_p, /*is_causal=*/true);
  const int64_t seq = q.size(-2);
  const at::Tensor causal = visible.logical_and(torch::ones({seq, seq}, visible.options()).tril());
  return at::scaled_dot_product_attention(q, k, v, causal, dropout_p, /*is_causal=*/false);
#else
  return chunked_causal_attention(q, k, v, dropout_p, visible);
#endif
}

}  // namespace megacpp::parallel::compat

namespace megacpp::parallel::compat {

#if TORCH_VERSION_MAJOR >= 2
double profiler_start_us(const torch::autograd::profiler::KinetoEvent& event) { return static_cast<double>(event.startNs()) / 1e3; }
double profiler_duration_us(const torch::autograd::profiler::KinetoEvent& event) {
  return static_cast<double>(event.durationNs()) / 1e3;
}
#else
double profiler_start_us(const torch::autograd::profiler::KinetoEvent& event) { return static_cast<double>(event.startUs()); }
double profiler_duration_us(const torch::autograd::profiler::KinetoEvent& event) {
  return static_cast<double>(event.durationUs());
}
#endif

}  // namespace megacpp::parallel::compat
