#include "models/layers/kv_cache.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

namespace megacpp::models {
namespace {

thread_local KvCache* active_cache = nullptr;

}  // namespace

void KvCache::append_documents(const at::Tensor& documents) {
  TORCH_CHECK(documents.dim() == 2, "KV cache: documents must be [batch, new tokens], got ", documents.sizes());
  TORCH_CHECK(!documents_.defined() || documents_.size(0) == documents.size(0), "KV cache: ", documents.size(0),
              " rows of documents for a cache of ", documents_.defined() ? documents_.size(0) : 0);
  documents_ = documents_.defined() ? torch::cat({documents_, documents.to(documents_.device())}, 1) : documents;
}

void KvCache::keep_rows(const at::Tensor& rows) {
  for (auto& [layer, entry] : entries_) {
    if (!entry.keys.defined()) continue;
    entry.keys = entry.keys.index_select(0, rows.to(entry.keys.device()));
    entry.values = entry.values.index_select(0, rows.to(entry.values.device()));
  }
  if (documents_.defined()) documents_ = documents_.index_select(0, rows.to(documents_.device()));
}

KvCacheScope::KvCacheScope(KvCache& cache) {
  TORCH_CHECK(!active_cache, "KvCacheScope: a KV cache is in use on this thread already");
  active_cache = &cache;
}

KvCacheScope::~KvCacheScope() { active_cache = nullptr; }

KvCache* KvCacheScope::active() { return active_cache; }

at::Tensor cached_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& documents,
                            int64_t sliding_window) {
  const int64_t fresh = q.size(-2), length = k.size(-2);
  TORCH_CHECK(documents.dim() == 2 && documents.size(1) == length, "cached attention: documents must be [batch, ", length,
              "], got ", documents.sizes());
  const auto index = torch::TensorOptions().dtype(torch::kLong).device(q.device());
  const at::Tensor key_at = torch::arange(length, index).unsqueeze(0);                    // [1, length]
  const at::Tensor query_at = torch::arange(length - fresh, length, index).unsqueeze(1);  // [new, 1]
  at::Tensor visible = key_at.le(query_at);                                                // [new, length]
  if (sliding_window > 0) visible = visible.logical_and(query_at.sub(key_at).lt(sliding_window));
  const at::Tensor docs = documents.to(q.device());
  const at::Tensor same_document = docs.narrow(1, length - fresh, fresh).unsqueeze(2).eq(docs.unsqueeze(1));  // [batch, new, length]
  visible = visible.unsqueeze(0).logical_and(same_document).unsqueeze(1);                                  // [batch, 1, new, length]
  const auto wide = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  at::Tensor scores = torch::matmul(q.to(wide), k.to(wide).transpose(-2, -1)).mul_(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  scores.masked_fill_(visible.logical_not(), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v.to(wide)).to(q.scalar_type());
}

}  // namespace megacpp::models
