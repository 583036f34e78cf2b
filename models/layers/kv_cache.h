// Note [KV cache]
// Generation reads a batch of prompts once and then one new token per row at a time. A KV cache
// keeps every Attention layer's keys and values of the tokens already read (after rotary,
// before the query groups are repeated), so that each step projects only the new tokens. While
// a KvCacheScope is alive on a thread, each Attention called on that thread appends its new keys
// and values to its own entry and attends over all of them: the new tokens are the last of the
// keys, each seeing the keys up to itself, only those of its own document (the documents of
// every position read, the new ones included, which the caller appends before each forward:
// Note [Packed documents]; left padding is a document of its own) and, with a sliding window,
// only the last window of them. The caller passes the new tokens' position ids.
#pragma once

#include <cstdint>
#include <unordered_map>

#include <ATen/core/Tensor.h>

namespace megacpp::models {

class KvCache {
 public:
  struct Entry {
    at::Tensor keys, values;  // [batch, kv_heads, cached, head_dim]; undefined before the first forward
  };

  // Before each forward: the new tokens' documents [batch, new] (any ids, equal within a document).
  void append_documents(const at::Tensor& documents);
  // The documents of every position, the new tokens' last: [batch, length()].
  const at::Tensor& documents() const { return documents_; }
  int64_t length() const { return documents_.defined() ? documents_.size(1) : 0; }
  // The entry of one Attention layer (by its address).
  Entry& entry(const void* layer) { return entries_[layer]; }
  // Keeps only `rows` (int64 indices) of every entry and of the documents: rows that finished
  // leave the batch.
  void keep_rows(const at::Tensor& rows);

 private:
  std::unordered_map<const void*, Entry> entries_;
  at::Tensor documents_;
};

// While alive, Attention layers called on this thread use `cache`. Scopes do not nest.
class KvCacheScope {
 public:
  explicit KvCacheScope(KvCache& cache);
  ~KvCacheScope();
  KvCacheScope(const KvCacheScope&) = delete;
  KvCacheScope& operator=(const KvCacheScope&) = delete;
  // The cache of the scope alive on this thread, or null.
  static KvCache* active();
};

// softmax(q k^T / sqrt(d)) v for the new tokens `q` [batch, heads, new, d] over all the cached
// keys and values [batch, heads, length, d] (the new tokens' last), each query seeing the keys
// up to its own position, of its own document (`documents` [batch, length]) and, with
// `sliding_window` > 0, the last sliding_window of them. The softmax in fp32 or wider.
at::Tensor cached_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& documents,
                            int64_t sliding_window);

}  // namespace megacpp::models
