// Note [Host memory]
// glibc gives large freed blocks back to the OS: blocks above the mmap threshold are unmapped
// and the top of the heap is trimmed. A training step frees and allocates the same large
// activations and gradients every iteration, so on the CPU every step faulted their pages in
// again (~11% of a step in perf). megacpp-train keeps freed memory in the process instead, as
// PyTorch users get from jemalloc or tcmalloc: blocks of 1 MiB and more in its caching
// allocator (Note [Host caching allocator]), smaller ones in glibc's heap with the mmap
// threshold at glibc's largest (32 MiB) and no trimming below 1 GiB. MALLOC_MMAP_THRESHOLD_ /
// MALLOC_TRIM_THRESHOLD_ in the environment win, MEGACPP_HOST_CACHING_ALLOCATOR=0 leaves
// libtorch's allocator (for valgrind or a sanitizer, which see malloc but not the cache's
// blocks), and MEGACPP_KEEP_HOST_MEMORY=0 leaves libtorch's allocator and glibc's defaults.
#pragma once

#include <c10/core/Device.h>

namespace megacpp::runtime {

void keep_freed_host_memory();

// Megatron's --empty-unused-memory-level: gives the memory a step freed but kept for reuse back
// (the CUDA caching allocator's cached blocks on a GPU; on the CPU the host caching allocator's
// and the heap glibc keeps).
void release_unused_memory(const c10::Device& device);

}  // namespace megacpp::runtime
