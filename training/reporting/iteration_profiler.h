// --profile: libtorch's profiler (Kineto) over a range of iterations, as Megatron's
// --profile --use-pytorch-profiler: it starts after iteration --profile-step-start and stops
// after iteration --profile-step-end, on the ranks of --profile-ranks, and writes one Chrome
// trace per rank (chrome://tracing, Perfetto, TensorBoard's profiler plugin) into
// --profile-save-path (default --tensorboard-dir, else ./profile).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "settings/arguments.h"

namespace at {
struct RecordFunction;
}

namespace megacpp::training::reporting {

class IterationProfiler {
 public:
  IterationProfiler(const settings::TrainingArguments& args, int rank);
  ~IterationProfiler();  // a run that ends inside the range still writes what was traced

  // Around each iteration, numbered as the log numbers them (from 1).
  void before(int64_t iteration);
  void after(int64_t iteration);

 private:
  void stop(int64_t last_iteration);

  bool enabled_;
  int rank_;
  int64_t first_, last_;  // the iterations traced
  std::string dir_;
  bool running_ = false;
  int64_t started_at_ = 0;
  std::unique_ptr<at::RecordFunction> iteration_scope_;  // "iteration N" in the trace
};

}  // namespace megacpp::training::reporting
