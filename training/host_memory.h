// Note [Host memory]
// glibc gives large freed blocks back to the OS: blocks above the mmap threshold are unmapped
// and the top of the heap is trimmed. A training step frees and allocates the same large
// activations and gradients every iteration, so on the CPU every step faulted its pages in
// again (~11% of a step in perf). megacpp-train keeps freed memory in the process instead, as
// PyTorch users get from jemalloc or tcmalloc: the mmap threshold at glibc's largest (32 MiB)
// and no trimming below 1 GiB. MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ in the
// environment win, and MEGACPP_KEEP_HOST_MEMORY=0 leaves glibc's defaults.
#pragma once

#include <c10/core/Device.h>

namespace megacpp::training {

void keep_freed_host_memory();

// Megatron's --empty-unused-memory-level: gives the memory a step freed but kept for reuse back
// (the CUDA caching allocator's cached blocks on a GPU; the heap glibc keeps on the CPU).
void release_unused_memory(const c10::Device& device);

}  // namespace megacpp::training
