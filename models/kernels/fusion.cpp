#include "models/kernels/fusion.h"

namespace megacpp::models::kernels {
namespace {

KernelFusion& current_fusion() {
  static KernelFusion fusion;
  return fusion;
}

}  // namespace

const KernelFusion& kernel_fusion() { return current_fusion(); }

void set_kernel_fusion(const KernelFusion& fusion) { current_fusion() = fusion; }

bool fusable(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || t.layout() != c10::kStrided) return false;
  const auto type = t.scalar_type();
  return type == c10::kFloat || type == c10::kBFloat16 || type == c10::kHalf;
}

}  // namespace megacpp::models::kernels
