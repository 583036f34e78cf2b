// Note [Host memory] and Note [Host caching allocator]: with megacpp-train's allocator, a large
// tensor freed in one step and allocated again in the next reuses the same pages (no page
// faults), while libtorch's default allocator faults them in every time; a size the cache holds
// no block for unmaps the longest-unused ones, so the memory kept stays within twice the most
// ever in use at once; empty_cache (--empty-unused-memory-level) gives everything back; raw allocations
// of both sizes go through raw_deleter.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <vector>

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include "runtime/host_caching_allocator.h"
#include "runtime/host_memory.h"

namespace megacpp {
namespace {

using runtime::HostCachingAllocator;

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Allocates a tensor of `mib` MiB, writes every page and frees it: the page faults that took.
long faults_of_one_step(int64_t mib) {
  const long before = minor_page_faults();
  {
    at::Tensor logits = torch::empty({mib << 18}, torch::kFloat);
    logits.fill_(1.0f);
  }
  return minor_page_faults() - before;
}

TEST(HostMemory, LargeTensorsReuseTheirPagesAcrossStepsWithinThePeakInUse) {
  constexpr long kPages = (64L << 20) / 4096;
  EXPECT_GT(faults_of_one_step(64), kPages / 2) << "glibc unmaps a 64 MiB block when it is freed";
  EXPECT_GT(faults_of_one_step(64), kPages / 2);
  runtime::install_host_caching_allocator();
  ASSERT_EQ(c10::GetCPUAllocator(), &HostCachingAllocator::instance());
  auto& allocator = HostCachingAllocator::instance();
  allocator.empty_cache();
  const auto before = allocator.stats();
  faults_of_one_step(64);  // mapped once
  for (int step = 0; step < 3; ++step) {
    EXPECT_LT(faults_of_one_step(64), kPages / 20) << "step " << step << " should reuse the first one's pages";
  }
  auto stats = allocator.stats();
  EXPECT_EQ(stats.maps - before.maps, 1);
  EXPECT_EQ(stats.hits - before.hits, 3);
  EXPECT_EQ(stats.in_use, 0u);
  // Sizes within a quarter of a cached block take it; a larger one maps anew, unmapping the
  // cached 64 MiB block to stay within twice the peak in use.
  faults_of_one_step(60);
  EXPECT_EQ(allocator.stats().maps, stats.maps);
  faults_of_one_step(100);
  stats = allocator.stats();
  EXPECT_EQ(stats.reserved, size_t{104} << 20) << "100 MiB rounded up to a multiple of 8 MiB, alone";
  EXPECT_LE(stats.reserved, 2 * stats.peak_in_use);
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved, 0u);
  EXPECT_GT(faults_of_one_step(64), kPages / 2) << "empty_cache gave the pages back";
  // Small tensors stay with malloc; raw allocations of both kinds are released.
  for (size_t bytes : {size_t{1000}, size_t{3} << 20}) {
    void* raw = allocator.raw_allocate(bytes);
    ASSERT_NE(raw, nullptr);
    allocator.raw_deallocate(raw);
  }
  EXPECT_EQ(allocator.stats().in_use, 0u);
  std::vector<at::Tensor> held;
  for (int i = 0; i < 3; ++i) held.push_back(torch::ones({1 << 18}));  // 1 MiB each, all in use at once
  EXPECT_EQ(allocator.stats().in_use, size_t{3} << 20);
  EXPECT_EQ(torch::cat(held).sum().item<float>(), 3.0f * (1 << 18));
}

}  // namespace
}  // namespace megacpp
