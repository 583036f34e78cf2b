#include "models/kernels/swiglu_kernel.h"

#include <torch/torch.h>

#include "models/kernels/vector_math.h"

namespace megacpp::models::kernels {
namespace {

constexpr int64_t kConvertBlock = 4096;  // elements converted to fp32 at a time

MEGACPP_ROW_LOOP void swiglu_block(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] / (1.0f + exp_approx(-gate[i])) * up[i];
}

// With s = sigmoid(g): d silu(g) / dg = s (1 + g (1 - s)).
MEGACPP_ROW_LOOP void swiglu_block_backward(const float* gate, const float* up, const float* dy, int64_t n, float* dgate, float* dup) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = 1.0f / (1.0f + exp_approx(-gate[i]));
    dgate[i] = dy[i] * up[i] * s * (1.0f + gate[i] * (1.0f - s));
    dup[i] = dy[i] * gate[i] * s;
  }
}

// body(begin, length, buffers...) over [0, numel) in blocks of kConvertBlock, in parallel.
template <typename F>
void for_each_block(int64_t numel, const F& body) {
  at::parallel_for(0, (numel + kConvertBlock - 1) / kConvertBlock, 8, [&](int64_t first, int64_t last) {
    for (int64_t block = first; block < last; ++block) {
      const int64_t begin = block * kConvertBlock;
      body(begin, std::min(kConvertBlock, numel - begin));
    }
  });
}

at::Tensor swiglu_forward(const at::Tensor& gate, const at::Tensor& up) {
  at::Tensor y = torch::empty_like(gate, at::MemoryFormat::Contiguous);
  with_element_type(gate.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = gate.data_ptr<T>();
    const T* u = up.data_ptr<T>();
    T* out = y.data_ptr<T>();
    for_each_block(gate.numel(), [&](int64_t begin, int64_t n) {
      std::vector<float> g_buffer, u_buffer, y_buffer(static_cast<size_t>(n));
      float* y_block = std::is_same_v<T, float> ? reinterpret_cast<float*>(out + begin) : y_buffer.data();
      swiglu_block(row_as_float(g + begin, n, g_buffer), row_as_float(u + begin, n, u_buffer), n, y_block);
      store_row(y_block, n, out + begin);
    });
  });
  return y;
}

std::pair<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad, const at::Tensor& gate, const at::Tensor& up) {
  const at::Tensor dy = grad.to(gate.scalar_type()).contiguous();
  at::Tensor dgate = torch::empty_like(gate, at::MemoryFormat::Contiguous), dup = torch::empty_like(up, at::MemoryFormat::Contiguous);
  with_element_type(gate.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = gate.data_ptr<T>();
    const T* u = up.data_ptr<T>();
    const T* d = dy.data_ptr<T>();
    T* dg = dgate.data_ptr<T>();
    T* du = dup.data_ptr<T>();
    for_each_block(gate.numel(), [&](int64_t begin, int64_t n) {
      std::vector<float> g_buffer, u_buffer, d_buffer, dg_buffer(static_cast<size_t>(n)), du_buffer(static_cast<size_t>(n));
      float* dg_block = std::is_same_v<T, float> ? reinterpret_cast<float*>(dg + begin) : dg_buffer.data();
      float* du_block = std::is_same_v<T, float> ? reinterpret_cast<float*>(du + begin) : du_buffer.data();
      swiglu_block_backward(row_as_float(g + begin, n, g_buffer), row_as_float(u + begin, n, u_buffer),
                            row_as_float(d + begin, n, d_buffer), n, dg_block, du_block);
      store_row(dg_block, n, dg + begin);
      store_row(du_block, n, du + begin);
    });
  });
  return {dgate, dup};
}

struct SwigluFunction : torch::autograd::Function<SwigluFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up) {
    ctx->save_for_backward({gate, up});
    return swiglu_forward(gate, up);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dgate, dup] = swiglu_backward(grads[0], saved[0], saved[1]);
    return {dgate, dup};
  }
};

}  // namespace

at::Tensor fused_swiglu(const at::Tensor& gate, const at::Tensor& up) {
  TORCH_CHECK(gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type(), "fused_swiglu: gate and up differ: ",
              gate.sizes(), " ", gate.scalar_type(), " and ", up.sizes(), " ", up.scalar_type());
  return SwigluFunction::apply(gate.contiguous(), up.contiguous());
}

}  // namespace megacpp::models::kernels
