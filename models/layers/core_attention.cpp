#include "models/layers/core_attention.h"

#include "parallel/compat.h"

namespace megacpp::models {

CoreAttention::CoreAttention(double dropout) : parallel::Module("CoreAttention"), dropout_(dropout) {}

parallel::Module::Tensors CoreAttention::forward_tensors(const Tensors& qkv) {
  TORCH_CHECK(qkv.size() == 3 || qkv.size() == 4, "CoreAttention takes q, k, v and optionally the documents, got ", qkv.size(),
              " tensors");
  at::Tensor same_document;
  if (qkv.size() == 4 && qkv[3].defined()) {
    const at::Tensor& documents = qkv[3];  // [batch, seq]
    TORCH_CHECK(documents.dim() == 2 && documents.size(1) == qkv[0].size(-2), "CoreAttention: documents must be [batch, ",
                qkv[0].size(-2), "], got ", documents.sizes());
    same_document = documents.unsqueeze(2).eq(documents.unsqueeze(1)).unsqueeze(1);  // [batch, 1, seq, seq]
  }
  return {parallel::compat::causal_attention(qkv[0], qkv[1], qkv[2], is_training() ? dropout_ : 0.0, same_document)};
}

}  // namespace megacpp::models
