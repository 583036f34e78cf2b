#include "models/kernels/rms_norm_kernel.h"

#include <torch/torch.h>

#include <mutex>

#include "models/kernels/vector_math.h"

namespace megacpp::models::kernels {
namespace {

// One row: y = x * rstd * scale; returns rstd = 1 / sqrt(mean(x^2) + eps).
MEGACPP_ROW_LOOP float normalize_row(const float* x, const float* scale, int64_t n, float eps, float* y) {
  const float squares = lane_sum(n, [&](int64_t i) { return x[i] * x[i]; });
  const float rstd = 1.0f / std::sqrt(squares / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * rstd * scale[i];
  return rstd;
}

// One row backward: dx = rstd * (dn - xhat * mean(dn * xhat)) with dn = dy * scale and
// xhat = x * rstd; the weight's gradient dy * xhat added to `dweight`.
MEGACPP_ROW_LOOP void normalize_row_backward(const float* x, const float* dy, const float* scale, int64_t n, float rstd,
                                             float* dx, float* dweight) {
  const float dot = lane_sum(n, [&](int64_t i) { return dy[i] * scale[i] * x[i] * rstd; });
  const float mean_dot = dot / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    const float xhat = x[i] * rstd;
    dx[i] = rstd * (dy[i] * scale[i] - xhat * mean_dot);
    dweight[i] += dy[i] * xhat;
  }
}

// The scale in fp32: weight, or 1 + weight.
std::vector<float> scale_of(const at::Tensor& weight, bool zero_centered_gamma) {
  const at::Tensor w = weight.to(torch::kFloat).contiguous();
  std::vector<float> scale(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
  if (zero_centered_gamma) {
    for (float& s : scale) s += 1.0f;
  }
  return scale;
}

std::pair<at::Tensor, at::Tensor> rms_norm_forward(const at::Tensor& input, const at::Tensor& weight, double eps, bool zero_centered_gamma) {
  const at::Tensor x = input.contiguous();
  const int64_t n = x.size(-1), rows = x.numel() / n;
  const std::vector<float> scale = scale_of(weight, zero_centered_gamma);
  at::Tensor y = torch::empty_like(x, at::MemoryFormat::Contiguous);
  at::Tensor rstd = torch::empty({rows}, x.options().dtype(torch::kFloat));
  with_element_type(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data_ptr<T>();
    T* out = y.data_ptr<T>();
    float* r = rstd.data_ptr<float>();
    for_each_row_range(rows, n, [&](int64_t begin, int64_t end) {
      std::vector<float> row_buffer, out_buffer(static_cast<size_t>(n));
      for (int64_t row = begin; row < end; ++row) {
        const float* in_row = row_as_float(in + row * n, n, row_buffer);
        float* out_row = std::is_same_v<T, float> ? reinterpret_cast<float*>(out + row * n) : out_buffer.data();
        r[row] = normalize_row(in_row, scale.data(), n, static_cast<float>(eps), out_row);
        store_row(out_row, n, out + row * n);
      }
    });
  });
  return {y, rstd};
}

std::pair<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& rstd,
                                           bool zero_centered_gamma) {
  const at::Tensor dy = grad.to(x.scalar_type()).contiguous();
  const int64_t n = x.size(-1), rows = x.numel() / n;
  const std::vector<float> scale = scale_of(weight, zero_centered_gamma);
  at::Tensor dx = torch::empty_like(x, at::MemoryFormat::Contiguous);
  std::vector<float> dweight(static_cast<size_t>(n), 0.0f);
  std::mutex merge;
  with_element_type(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data_ptr<T>();
    const T* dout = dy.data_ptr<T>();
    T* din = dx.data_ptr<T>();
    const float* r = rstd.data_ptr<float>();
    for_each_row_range(rows, n, [&](int64_t begin, int64_t end) {
      std::vector<float> x_buffer, dy_buffer, dx_buffer(static_cast<size_t>(n)), partial(static_cast<size_t>(n), 0.0f);
      for (int64_t row = begin; row < end; ++row) {
        float* dx_row = std::is_same_v<T, float> ? reinterpret_cast<float*>(din + row * n) : dx_buffer.data();
        normalize_row_backward(row_as_float(in + row * n, n, x_buffer), row_as_float(dout + row * n, n, dy_buffer), scale.data(), n,
                               r[row], dx_row, partial.data());
        store_row(dx_row, n, din + row * n);
      }
      const std::lock_guard<std::mutex> lock(merge);
      for (int64_t i = 0; i < n; ++i) dweight[static_cast<size_t>(i)] += partial[static_cast<size_t>(i)];
    });
  });
  at::Tensor dw = torch::from_blob(dweight.data(), {n}, torch::kFloat).to(weight.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
  return {dx, dw};
}

struct RmsNormFunction : torch::autograd::Function<RmsNormFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps,
                            bool zero_centered_gamma) {
    auto [y, rstd] = rms_norm_forward(x, weight, eps, zero_centered_gamma);
    ctx->save_for_backward({x, weight, rstd});
    ctx->saved_data["zero_centered_gamma"] = zero_centered_gamma;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dx, dw] = rms_norm_backward(grads[0], saved[0], saved[1], saved[2], ctx->saved_data["zero_centered_gamma"].toBool());
    return {dx, dw, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, bool zero_centered_gamma) {
  TORCH_CHECK(weight.dim() == 1 && x.size(-1) == weight.size(0), "fused_rms_norm: weight [", x.size(-1), "] expected, got ",
              weight.sizes());
  return RmsNormFunction::apply(x.contiguous(), weight, eps, zero_centered_gamma);  // backward reads it as rows
}

}  // namespace megacpp::models::kernels
