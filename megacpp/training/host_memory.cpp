#include "megacpp/training/host_memory.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace megacpp::training {

void keep_freed_host_memory() {
  const char* keep = std::getenv("MEGACPP_KEEP_HOST_MEMORY");
  if (keep && std::strcmp(keep, "0") == 0) return;
  constexpr int kMiB = 1 << 20;
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 32 * kMiB);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 1024 * kMiB);
}

}  // namespace megacpp::training
