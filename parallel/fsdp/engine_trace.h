// A record of what the FSDP engine does, in order ("all-gather layers.1", "backward layers.1",
// "reduce-scatter issued layers.1", "reduce-scatter done layers.1"), for tests that check when
// communication is issued and waited for. Off (and free) unless a test turns it on.
#pragma once

#include <string>
#include <vector>

namespace megacpp::parallel::fsdp {

// Records into `events` until called with null. Not thread-safe: turn it on and off around
// work on one thread.
void set_engine_trace(std::vector<std::string>* events);
bool engine_trace_on();
void trace_engine(const std::string& event);

}  // namespace megacpp::parallel::fsdp
