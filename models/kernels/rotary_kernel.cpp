#include "models/kernels/rotary_kernel.h"

#include <torch/torch.h>

#include "models/kernels/vector_math.h"

namespace megacpp::models::kernels {
namespace {

// y = x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] over the halves x1, x2.
MEGACPP_ROW_LOOP void rotate_row(const float* __restrict x, const float* __restrict cos, const float* __restrict sin, int64_t half,
                                  float* __restrict y) {
  for (int64_t i = 0; i < half; ++i) {
    y[i] = x[i] * cos[i] - x[i + half] * sin[i];
    y[i + half] = x[i + half] * cos[i + half] + x[i] * sin[i + half];
  }
}

// The transpose: dx = dy * cos + rotate_half^T(dy * sin), rotate_half^T(z) = [z2, -z1].
MEGACPP_ROW_LOOP void rotate_row_backward(const float* __restrict dy, const float* __restrict cos, const float* __restrict sin,
                                           int64_t half, float* __restrict dx) {
  for (int64_t i = 0; i < half; ++i) {
    dx[i] = dy[i] * cos[i] + dy[i + half] * sin[i + half];
    dx[i + half] = dy[i + half] * cos[i + half] - dy[i] * sin[i];
  }
}

// out [batch, heads, seq, dim] contiguous = the row function of in (strides as given) and the
// angles of its sample and position; `backward` picks the transpose.
at::Tensor rotate(const at::Tensor& in, const at::Tensor& cos, const at::Tensor& sin, bool backward) {
  const int64_t batch = in.size(0), heads = in.size(1), seq = in.size(2), dim = in.size(3), half = dim / 2;
  const bool per_sample = cos.dim() == 3;
  at::Tensor out = torch::empty(in.sizes(), in.options().memory_format(at::MemoryFormat::Contiguous));
  with_element_type(in.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = in.data_ptr<T>();
    T* y = out.data_ptr<T>();
    const float* c = cos.data_ptr<float>();
    const float* s = sin.data_ptr<float>();
    const int64_t sb = in.stride(0), sh = in.stride(1), ss = in.stride(2);
    for_each_row_range(batch * heads * seq, dim, [&](int64_t begin, int64_t end) {
      std::vector<float> x_buffer, y_buffer(static_cast<size_t>(dim));
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / (heads * seq), h = row / seq % heads, p = row % seq;
        const float* x_row = row_as_float(x + b * sb + h * sh + p * ss, dim, x_buffer);
        const int64_t angle = ((per_sample ? b * seq : 0) + p) * dim;
        float* y_row = std::is_same_v<T, float> ? reinterpret_cast<float*>(y + row * dim) : y_buffer.data();
        (backward ? rotate_row_backward : rotate_row)(x_row, c + angle, s + angle, half, y_row);
        store_row(y_row, dim, y + row * dim);
      }
    });
  });
  return out;
}

struct RotaryFunction : torch::autograd::Function<RotaryFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return rotate(x, cos, sin, /*backward=*/false);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor dy = grads[0].stride(-1) == 1 ? grads[0] : grads[0].contiguous();
    return {rotate(dy, saved[0], saved[1], /*backward=*/true), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(x.dim() == 4 && x.size(3) % 2 == 0, "fused_rotary: x [batch, heads, seq, head_dim] with an even head_dim expected, got ",
              x.sizes());
  const bool per_sample = cos.dim() == 3;
  TORCH_CHECK(cos.scalar_type() == torch::kFloat && cos.sizes() == sin.sizes() && (cos.dim() == 2 || per_sample) &&
                  cos.size(-2) == x.size(2) && cos.size(-1) == x.size(3) && (!per_sample || cos.size(0) == x.size(0)),
              "fused_rotary: fp32 cos and sin [seq, head_dim] or [batch, seq, head_dim] for x ", x.sizes(), " expected, got ",
              cos.sizes(), " ", cos.scalar_type());
  const at::Tensor input = x.stride(3) == 1 ? x : x.contiguous();
  return RotaryFunction::apply(input, cos.contiguous(), sin.contiguous());
}

}  // namespace megacpp::models::kernels
