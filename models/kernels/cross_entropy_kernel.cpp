#include "models/kernels/cross_entropy_kernel.h"

#include <torch/torch.h>

#include <cmath>

#include "models/kernels/vector_math.h"

namespace megacpp::models::kernels {
namespace {

constexpr int64_t kIgnoredLabel = -100;

// log(sum(exp(x))) of one row, from its maximum.
MEGACPP_ROW_LOOP float log_sum_exp_row(const float* x, int64_t n) {
  const float top = lane_max(x, n);
  const float sum = lane_sum(n, [&](int64_t i) { return exp_approx(x[i] - top); });
  return top + std::log(sum);
}

// dx = exp(x - lse) * scale, then the label's entry less scale.
MEGACPP_ROW_LOOP void softmax_row_gradient(const float* x, int64_t n, float lse, float scale, float* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] = exp_approx(x[i] - lse) * scale;
}

void check_labels(const at::Tensor& labels, int64_t vocab) {
  const at::Tensor outside = labels.ne(kIgnoredLabel).logical_and(labels.lt(0).logical_or(labels.ge(vocab)));
  if (outside.any().item<bool>()) {
    const int64_t row = outside.nonzero()[0][0].item<int64_t>();
    TORCH_CHECK(false, "cross-entropy: label ", labels[row].item<int64_t>(), " of row ", row, " is outside the vocabulary [0, ",
                vocab, ")");
  }
}

std::pair<at::Tensor, at::Tensor> cross_entropy_forward(const at::Tensor& logits, const at::Tensor& labels) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  at::Tensor losses = torch::empty({rows}, logits.options().dtype(torch::kFloat));
  at::Tensor lse = torch::empty({rows}, logits.options().dtype(torch::kFloat));
  const int64_t* label = labels.data_ptr<int64_t>();
  with_element_type(logits.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data_ptr<T>();
    float* loss = losses.data_ptr<float>();
    float* l = lse.data_ptr<float>();
    for_each_row_range(rows, vocab, [&](int64_t begin, int64_t end) {
      std::vector<float> buffer;
      for (int64_t row = begin; row < end; ++row) {
        const float* x_row = row_as_float(x + row * vocab, vocab, buffer);
        l[row] = log_sum_exp_row(x_row, vocab);
        loss[row] = label[row] == kIgnoredLabel ? 0.0f : l[row] - x_row[label[row]];
      }
    });
  });
  return {losses, lse};
}

at::Tensor cross_entropy_backward(const at::Tensor& grad, const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& lse) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  const at::Tensor row_grad = grad.to(torch::kFloat).contiguous();
  at::Tensor dlogits = torch::empty_like(logits, at::MemoryFormat::Contiguous);
  const int64_t* label = labels.data_ptr<int64_t>();
  with_element_type(logits.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data_ptr<T>();
    T* dx = dlogits.data_ptr<T>();
    const float* g = row_grad.data_ptr<float>();
    const float* l = lse.data_ptr<float>();
    for_each_row_range(rows, vocab, [&](int64_t begin, int64_t end) {
      std::vector<float> buffer, dx_buffer(static_cast<size_t>(vocab));
      for (int64_t row = begin; row < end; ++row) {
        float* dx_row = std::is_same_v<T, float> ? reinterpret_cast<float*>(dx + row * vocab) : dx_buffer.data();
        const bool ignored = label[row] == kIgnoredLabel;
        softmax_row_gradient(row_as_float(x + row * vocab, vocab, buffer), vocab, l[row], ignored ? 0.0f : g[row], dx_row);
        if (!ignored) dx_row[label[row]] -= g[row];
        store_row(dx_row, vocab, dx + row * vocab);
      }
    });
  });
  return dlogits;
}

struct CrossEntropyFunction : torch::autograd::Function<CrossEntropyFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& labels) {
    auto [losses, lse] = cross_entropy_forward(logits, labels);
    ctx->save_for_backward({logits, labels, lse});
    return losses;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {cross_entropy_backward(grads[0], saved[0], saved[1], saved[2]), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
  TORCH_CHECK(logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0) && logits.size(1) > 0,
              "fused_cross_entropy: logits [rows, vocab] and labels [rows] expected, got ", logits.sizes(), " and ", labels.sizes());
  const at::Tensor targets = labels.to(torch::kLong).contiguous();
  check_labels(targets, logits.size(1));
  return CrossEntropyFunction::apply(logits.contiguous(), targets);
}

}  // namespace megacpp::models::kernels
