#include "runtime/host_caching_allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

namespace megacpp::runtime {
namespace {

constexpr size_t kPage = 4096;

// `bytes` rounded up to a multiple of an eighth of its largest power of two (and of a page).
size_t size_class(size_t bytes) {
  const size_t power = size_t{1} << (63 - __builtin_clzll(bytes));
  const size_t step = std::max(power / 8, kPage);
  return (bytes + step - 1) / step * step;
}

// A new block of `size` bytes, or null. The kernel puts large mappings at 2 MiB boundaries, so
// every block would start at the same offset in the caches' sets and the streams of one kernel
// (AdamW's parameter, gradient and moments; a matmul's operands) would evict each other: the
// n-th block starts (n mod 32) x 128 bytes into its mapping instead (cache colouring). Measured
// at sequence 256, fastest iteration against libtorch's own allocator, 4 interleaved pairs:
// 1.01-1.07x without colouring, 0.94-1.06x with it.
void* map_block(size_t size, int64_t n) {
  void* mapping = mmap(nullptr, size + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) return nullptr;
  return static_cast<char*>(mapping) + (n % 32) * 128;
}

void unmap_block(void* block, size_t size) {
  munmap(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(block) & ~(kPage - 1)), size + kPage);
}

// The blocks of kCachedFrom bytes and more: those in use by their address, the free ones by
// size (for the best fit) and by the order they were freed in (the oldest are unmapped first).
class BlockCache {
 public:
  void* take(size_t bytes) {
    const size_t size = size_class(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    const auto fit = free_by_size_.lower_bound(size);
    if (fit != free_by_size_.end() && fit->first <= size + size / 4) {
      void* block = free_by_age_.at(fit->second).first;
      free_by_age_.erase(fit->second);
      use(block, fit->first);
      free_by_size_.erase(fit);
      ++stats_.hits;
      return block;
    }
    evict_for(size);
    void* block = map_block(size, stats_.maps);
    if (!block) {  // what is cached may be what is missing
      while (!free_by_age_.empty()) unmap_oldest();
      block = map_block(size, stats_.maps);
    }
    // The words of libtorch's own allocator, which the out-of-memory reports look for.
    TORCH_CHECK(block, "host caching allocator: can't allocate memory: you tried to allocate ", bytes,
                " bytes (", stats_.in_use, " bytes in use by tensors of 1 MiB and more): ", std::strerror(errno));
    stats_.reserved += size;
    ++stats_.maps;
    use(block, size);
    return block;
  }

  // False if `block` is not one of this cache's.
  bool give_back(void* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = in_use_.find(block);
    if (found == in_use_.end()) return false;
    const uint64_t age = next_age_++;
    free_by_age_.emplace(age, std::make_pair(block, found->second));
    free_by_size_.emplace(found->second, age);
    stats_.in_use -= found->second;
    in_use_.erase(found);
    return true;
  }

  void empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!free_by_age_.empty()) unmap_oldest();
  }

  HostCachingAllocator::Stats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_since_reset = stats_.in_use;
  }

 private:
  void use(void* block, size_t size) {
    in_use_.emplace(block, size);
    stats_.in_use += size;
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    stats_.peak_since_reset = std::max(stats_.peak_since_reset, stats_.in_use);
  }

  // Unmaps the longest-unused free blocks until mapping `size` more keeps the reserved memory
  // within twice the most ever in use at once (counting this request).
  void evict_for(size_t size) {
    const size_t limit = std::max(2 * stats_.peak_in_use, stats_.in_use + size);
    while (stats_.reserved + size > limit && !free_by_age_.empty()) unmap_oldest();
  }

  void unmap_oldest() {
    const auto oldest = free_by_age_.begin();
    const auto [block, size] = oldest->second;
    auto first = free_by_size_.lower_bound(size);
    while (first->second != oldest->first) ++first;
    free_by_size_.erase(first);
    free_by_age_.erase(oldest);
    unmap_block(block, size);
    stats_.reserved -= size;
  }

  std::mutex mutex_;
  std::unordered_map<void*, size_t> in_use_;
  std::multimap<size_t, uint64_t> free_by_size_;  // size -> age
  std::map<uint64_t, std::pair<void*, size_t>> free_by_age_;  // age -> block, size
  uint64_t next_age_ = 0;
  HostCachingAllocator::Stats stats_;
};

BlockCache& cache() {
  static BlockCache* blocks = new BlockCache();  // never destroyed, like the allocator
  return *blocks;
}

// The deleter of every block (c10::Allocator::raw_deleter's contract: allocate's one deleter).
void release(void* block) {
  if (!cache().give_back(block)) c10::free_cpu(block);
}

c10::DataPtr take(size_t bytes) {
  void* block = bytes < HostCachingAllocator::kCachedFrom ? c10::alloc_cpu(bytes) : cache().take(bytes);
  return {block, block, &release, c10::Device(c10::kCPU)};
}

}  // namespace

HostCachingAllocator& HostCachingAllocator::instance() {
  static HostCachingAllocator* allocator = new HostCachingAllocator();
  return *allocator;
}

c10::DataPtr HostCachingAllocator::allocate(size_t bytes) const { return take(bytes); }
c10::DataPtr HostCachingAllocator::allocate(size_t bytes) { return take(bytes); }
c10::DeleterFnPtr HostCachingAllocator::raw_deleter() const { return &release; }
void HostCachingAllocator::copy_data(void* dest, const void* src, size_t count) const { std::memcpy(dest, src, count); }
void HostCachingAllocator::empty_cache() { cache().empty(); }
HostCachingAllocator::Stats HostCachingAllocator::stats() const { return cache().stats(); }
void HostCachingAllocator::reset_peak_stats() { cache().reset_peak(); }

void install_host_caching_allocator() {
  c10::SetCPUAllocator(&HostCachingAllocator::instance(), /*priority=*/1);
}

}  // namespace megacpp::runtime
