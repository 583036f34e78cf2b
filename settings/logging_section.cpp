// The logging section (Note [Flag sections]): the log, TensorBoard, FLOPs utilization,
// profiling, and the parameters dumped after training.
#include "megacpp/errors.h"
#include "settings/flag_section.h"

namespace megacpp::settings {
namespace {

void declare_logging_flags(cxxopts::Options& o) {
  o.add_options("logging")
      ("log-interval", "iterations between log lines", cxxopts::value<std::string>()->default_value("100"))
      ("peak-tflops", "peak TFLOP/s of one device, to log model FLOPs utilization (MFU)", cxxopts::value<std::string>()->default_value("0"))
      ("tensorboard-dir", "write TensorBoard event files here (rank 0)", cxxopts::value<std::string>()->default_value(""))
      ("tensorboard-log-interval", "iterations between TensorBoard points", cxxopts::value<std::string>()->default_value("1"))
      ("profile", "trace the iterations after --profile-step-start up to --profile-step-end with libtorch's profiler")
      ("profile-step-start", "profiling starts after this iteration", cxxopts::value<std::string>()->default_value("10"))
      ("profile-step-end", "profiling stops after this iteration", cxxopts::value<std::string>()->default_value("12"))
      ("profile-ranks", "the ranks that profile", cxxopts::value<std::string>()->default_value("0"))
      ("profile-save-path", "where the traces go (default: --tensorboard-dir, else ./profile)",
       cxxopts::value<std::string>()->default_value(""))
      ("dump-final-params", "after training, write the gathered fp32 parameters to this file (torch archive)",
       cxxopts::value<std::string>()->default_value(""));
}

// --profile: the iterations after start, up to and including end, on the ranks listed.
void check_profile(const TrainingArguments& a) {
  if (!a.profile) return;
  require(a.profile_step_start >= 0, "--profile-step-start must be >= 0");
  require(a.profile_step_end > a.profile_step_start, "--profile-step-end must be > --profile-step-start (the iterations "
                                                     "after start, up to and including end, are traced)");
  for (int rank : a.profile_ranks) require(rank >= 0, "--profile-ranks must list ranks >= 0");
}

void read_logging_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.log_interval = flag_number<int64_t>(r, "log-interval");
  a.peak_tflops = flag_number<double>(r, "peak-tflops");
  a.tensorboard_dir = r["tensorboard-dir"].as<std::string>();
  a.tensorboard_log_interval = flag_number<int64_t>(r, "tensorboard-log-interval");
  a.dump_final_params = r["dump-final-params"].as<std::string>();
  a.profile = r["profile"].as<bool>();
  a.profile_step_start = flag_number<int64_t>(r, "profile-step-start");
  a.profile_step_end = flag_number<int64_t>(r, "profile-step-end");
  a.profile_ranks.clear();
  for (const auto& rank : split_words(r["profile-ranks"].as<std::string>())) {
    a.profile_ranks.push_back(models::parse_flag_number<int>("profile-ranks", rank));
  }
  a.profile_dir = r["profile-save-path"].as<std::string>();
  if (a.profile_dir.empty()) a.profile_dir = a.tensorboard_dir.empty() ? "profile" : a.tensorboard_dir;
  require(a.log_interval > 0, "--log-interval must be positive");
  require(a.peak_tflops >= 0, "--peak-tflops must be >= 0 (0: unknown)");
  require(a.tensorboard_log_interval > 0, "--tensorboard-log-interval must be positive");
  check_profile(a);
}

}  // namespace

FlagSection logging_section() { return {"logging", declare_logging_flags, read_logging_flags}; }

}  // namespace megacpp::settings
