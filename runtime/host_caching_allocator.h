// Note [Host caching allocator]
// libtorch's CPU allocator is posix_memalign/free. A training step allocates and frees the same
// large activations, logits and gradients every iteration; glibc unmaps blocks above its mmap
// threshold (at most 32 MiB) when they are freed, and with glibc 2.36 (bookworm) a freed block
// below it is not taken again by the next aligned allocation of the same size (the heap grows
// until the trim threshold instead), so every step faulted its large buffers' pages in anew:
// ~0.1 s of system time per 2 s iteration at sequence 1024. megacpp-train therefore installs
// this allocator as libtorch's CPU allocator (c10::SetCPUAllocator), as the CUDA caching
// allocator does on the GPU: blocks of 1 MiB and more are mapped once (mmap), kept when freed
// and handed out again for a request of their size class (sizes rounded up to an eighth of
// their power of two, so a block serves requests within 25% of its size); smaller blocks stay
// with glibc's malloc. Blocks are not split or merged, so serving every request of a step from
// the cache takes more than the most memory in use at once: 1.09x-1.18x it for the
// benchmark's Llama on one process (sequence 256-4096), 1.64x with FSDP on 2 ranks (gathered
// parameters and reduce buffers of other sizes come and go). The reserved memory is kept within
// twice that peak: a request no cached block fits unmaps the longest-unused blocks first, so a
// run whose sizes change (packed documents, a ramped batch) does not grow without bound. (With
// the bound at 1x or 1.25x, misses cascaded: each iteration mapped and unmapped blocks again
// and the page faults came back.) empty_cache() unmaps every cached block (Megatron's
// --empty-unused-memory-level).
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>

namespace megacpp::runtime {

class HostCachingAllocator final : public c10::Allocator {
 public:
  static constexpr size_t kCachedFrom = size_t{1} << 20;

  struct Stats {
    size_t in_use = 0, reserved = 0, peak_in_use = 0;  // bytes of cached-size blocks
    size_t peak_since_reset = 0;                        // peak_in_use since reset_peak_stats()
    int64_t maps = 0, hits = 0;                         // blocks mapped, requests served from the cache
  };

  // The one instance (never destroyed: tensors may outlive static destruction).
  static HostCachingAllocator& instance();

  // c10::Allocator's allocate is const in libtorch 1.13 and not from 2.3 on; both are declared
  // (without `override`), so whichever the base has is overridden.
  c10::DataPtr allocate(size_t bytes) const;
  c10::DataPtr allocate(size_t bytes);
  c10::DeleterFnPtr raw_deleter() const override;
  // Pure virtual in libtorch 2.3+, unused by 1.13.
  void copy_data(void* dest, const void* src, size_t count) const;

  void empty_cache();
  Stats stats() const;
  // Starts peak_since_reset again from what is in use now (torch.cuda.reset_peak_memory_stats),
  // to measure one phase's peak; the eviction bound keeps the all-time peak.
  void reset_peak_stats();

 private:
  HostCachingAllocator() = default;
};

// Makes the caching allocator libtorch's CPU allocator for every tensor allocated from now on.
void install_host_caching_allocator();

}  // namespace megacpp::runtime
