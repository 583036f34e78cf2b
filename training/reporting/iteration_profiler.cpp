#include "training/reporting/iteration_profiler.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <ATen/record_function.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "parallel/compat.h"
#include "io/serialization/atomic_file.h"

namespace megacpp::training::reporting {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

ProfilerConfig trace_config() {
  return ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true, /*profile_memory=*/false,
                        /*with_stack=*/false, /*with_flops=*/false, /*with_modules=*/false);
}

std::set<ActivityType> activities() {
  std::set<ActivityType> kinds = {ActivityType::CPU};
#ifdef MEGACPP_WITH_CUDA
  kinds.insert(ActivityType::CUDA);
#endif
  return kinds;
}

// The Chrome trace event format ("X" complete events, microseconds), written from the events
// themselves: Debian's libtorch has no Kineto to write the trace (ProfilerResult::save).
nlohmann::json chrome_trace(const std::vector<profiler::KinetoEvent>& events, int rank) {
  nlohmann::json trace_events = nlohmann::json::array();
  for (const auto& e : events) {
    const bool on_device = e.deviceType() != c10::DeviceType::CPU;
    nlohmann::json event = {{"ph", "X"},
                            {"cat", on_device ? "kernel" : "cpu_op"},
                            {"name", e.name()},
                            {"pid", rank},
                            {"tid", static_cast<int64_t>(e.startThreadId())},
                            {"ts", parallel::compat::profiler_start_us(e)},
                            {"dur", parallel::compat::profiler_duration_us(e)}};
    if (e.hasShapes() && !e.shapes().empty()) event["args"] = {{"Input Dims", e.shapes().vec()}};
    trace_events.push_back(std::move(event));
  }
  return {{"traceEvents", std::move(trace_events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace

IterationProfiler::IterationProfiler(const settings::TrainingArguments& args, int rank)
    : enabled_(args.profile && std::count(args.profile_ranks.begin(), args.profile_ranks.end(), rank) > 0), rank_(rank),
      first_(args.profile_step_start + 1), last_(args.profile_step_end), dir_(args.profile_dir) {}

IterationProfiler::~IterationProfiler() {
  if (!running_) return;
  try {
    stop(last_);
  } catch (const std::exception& e) {
    spdlog::warn("profile: the trace could not be written: {}", e.what());
  }
}

void IterationProfiler::before(int64_t iteration) {
  if (enabled_ && !running_ && iteration == first_) {
    profiler::prepareProfiler(trace_config(), activities());
    profiler::enableProfiler(trace_config(), activities());
    running_ = true;
    started_at_ = iteration;
    spdlog::info("profile: tracing iterations {} to {}", first_, last_);
  }
  if (!running_) return;
  // Each iteration as a span of its own in the trace.
  iteration_scope_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (iteration_scope_->isActive()) iteration_scope_->before("iteration " + std::to_string(iteration));
}

void IterationProfiler::after(int64_t iteration) {
  iteration_scope_.reset();
  if (running_ && iteration == last_) stop(iteration);
}

void IterationProfiler::stop(int64_t last_iteration) {
  iteration_scope_.reset();
  running_ = false;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  std::filesystem::create_directories(dir_);
  const std::string name = "rank" + std::to_string(rank_) + "_iterations_" + std::to_string(started_at_) + "-" +
                           std::to_string(last_iteration) + ".pt.trace.json";
  const std::string path = (std::filesystem::path(dir_) / name).string();
  io::serialization::write_file_atomically(path, chrome_trace(result->events(), rank_).dump());
  spdlog::info("profile: wrote {} ({} events)", path, result->events().size());
}

}  // namespace megacpp::training::reporting
