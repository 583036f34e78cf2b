// A rank's progress for megacpp-run's hang detection (Note [Hang detection] in
// launch/hang_watch.h): whenever the rank moves on (a micro-batch, the optimizer step, a
// validation batch, a save), it rewrites $MEGACPP_HEARTBEAT_FILE with a counter and the phase
// it is entering. Without that variable (torchrun, a process on its own) it does nothing.
#pragma once

#include <cstdint>
#include <string>

namespace megacpp::runtime {

class Heartbeat {
 public:
  Heartbeat();  // opens $MEGACPP_HEARTBEAT_FILE if set; throws std::runtime_error naming it when it cannot
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Reports progress: the rank now enters `phase` (e.g. "iteration 12: micro-batch 1 of 4").
  void beat(const std::string& phase);
  // The phase last entered, kept also without a file (for error messages).
  const std::string& phase() const { return phase_; }

 private:
  int fd_ = -1;
  uint64_t count_ = 0;
  std::string phase_ = "starting";
};

}  // namespace megacpp::runtime
