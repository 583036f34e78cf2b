// FSDP2's side streams on a CUDA device (Note [Streams] in comm_streams.cpp).
#pragma once

#include <optional>

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

namespace megacpp::parallel::fsdp {

class CommStreams {
 public:
  // The side streams of `device`, made once and shared by every group on it. Null on the CPU, or
  // with MEGACPP_FSDP_STREAMS=0: then everything runs on the current stream.
  static CommStreams* for_device(const c10::Device& device);

  c10::Stream current() const;  // the stream compute runs on now
  const c10::Stream& copy_in() const { return copy_in_; }
  const c10::Stream& all_gather() const { return all_gather_; }
  const c10::Stream& reduce_scatter() const { return reduce_scatter_; }

 private:
  CommStreams(c10::Stream copy_in, c10::Stream all_gather, c10::Stream reduce_scatter);

  c10::Stream copy_in_, all_gather_, reduce_scatter_;
};

// An event recorded on `stream` now: what was enqueued there so far.
c10::Event record_event(const c10::Stream& stream);
// `waiter` runs what is enqueued on it later only after what `stream` has enqueued so far.
void wait_stream(const c10::Stream& waiter, const c10::Stream& stream);

// A record of work on a side stream that other streams must wait for before they read its result
// or reuse its memory; empty when nothing is pending.
using PendingEvent = std::optional<c10::Event>;

}  // namespace megacpp::parallel::fsdp
