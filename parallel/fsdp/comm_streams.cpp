// Note [Streams]
// On a CUDA device the engine works as FSDP2 does, on three high-priority side streams beside the
// compute (current) stream, ordered by events rather than recordStream:
//  - all-gather copy-in: the shards are cast (or copied from pinned host memory, with offload)
//    into the flat input on their own stream, so the copy does not wait behind compute;
//  - all-gather: the collective, then an event that compute waits for before the copy-out;
//  - reduce-scatter: after a group's backward it waits for compute, reduce-scatters the packed
//    gradients, and then divides and adds them into the shards' .grad (FSDP2's post-reduce).
// Memory follows the caching allocator's rule that a block is reused only by the stream it was
// allocated on: a buffer that another stream reads is kept alive until an event shows that stream
// is done with it (the gather buffers until the copy-out, the reduce-scatter input until the
// collective), and only then released. At the end of backward compute waits for the
// reduce-scatter stream, so the optimizer sees every gradient. On the CPU (Gloo) there are no
// streams: the collectives' work handles give the overlap, and nothing here runs.
// MEGACPP_FSDP_STREAMS=0 keeps everything on the current stream, for measuring what the side
// streams bring (docs/performance.md#gpu).
#include "parallel/fsdp/comm_streams.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#ifdef MEGACPP_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace megacpp::parallel::fsdp {

CommStreams::CommStreams(c10::Stream copy_in, c10::Stream all_gather, c10::Stream reduce_scatter)
    : copy_in_(copy_in), all_gather_(all_gather), reduce_scatter_(reduce_scatter) {}

CommStreams* CommStreams::for_device(const c10::Device& device) {
#ifdef MEGACPP_WITH_CUDA
  // Read once: every caller (the groups, the end of backward) must agree for the whole run.
  static const bool enabled = [] {
    const char* value = std::getenv("MEGACPP_FSDP_STREAMS");
    return !(value && std::strcmp(value, "0") == 0);
  }();
  if (!device.is_cuda() || !enabled) return nullptr;
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, std::unique_ptr<CommStreams>> streams;
  std::lock_guard<std::mutex> lock(mutex);
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  auto& found = streams[index];
  if (!found) {
    auto side_stream = [index] { return c10::Stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, index)); };
    found.reset(new CommStreams(side_stream(), side_stream(), side_stream()));
  }
  return found.get();
#else
  (void)device;
  return nullptr;
#endif
}

c10::Stream CommStreams::current() const {
#ifdef MEGACPP_WITH_CUDA
  return c10::cuda::getCurrentCUDAStream(copy_in_.device_index());
#else
  return copy_in_;  // never reached: for_device makes no streams without CUDA
#endif
}

c10::Event record_event(const c10::Stream& stream) {
  c10::Event event(stream.device_type());
  event.record(stream);
  return event;
}

void wait_stream(const c10::Stream& waiter, const c10::Stream& stream) {
  if (waiter == stream) return;
  record_event(stream).block(waiter);
}

}  // namespace megacpp::parallel::fsdp
