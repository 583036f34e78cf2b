#include "runtime/host_memory.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "runtime/host_caching_allocator.h"

#ifdef MEGACPP_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace megacpp::runtime {

void keep_freed_host_memory() {
  const char* keep = std::getenv("MEGACPP_KEEP_HOST_MEMORY");
  if (keep && std::strcmp(keep, "0") == 0) return;
  constexpr int kMiB = 1 << 20;
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 32 * kMiB);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 1024 * kMiB);
  const char* cache = std::getenv("MEGACPP_HOST_CACHING_ALLOCATOR");
  if (!cache || std::strcmp(cache, "0") != 0) install_host_caching_allocator();  // Note [Host caching allocator]
}

void release_unused_memory(const c10::Device& device) {
#ifdef MEGACPP_WITH_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::emptyCache();
    return;
  }
#endif
  HostCachingAllocator::instance().empty_cache();
  malloc_trim(0);
}

}  // namespace megacpp::runtime
