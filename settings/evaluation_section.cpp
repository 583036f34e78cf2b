// The evaluation section (Note [Flag sections]): how often and how long validation runs, and
// when the run stops early.
#include "megacpp/errors.h"
#include "settings/flag_section.h"

namespace megacpp::settings {
namespace {

void declare_evaluation_flags(cxxopts::Options& o) {
  o.add_options("evaluation")
      ("eval-interval", "iterations between validation runs", cxxopts::value<std::string>()->default_value("1000"))
      ("eval-iters", "validation batches per run (0: no validation)", cxxopts::value<std::string>()->default_value("100"))
      ("exit-interval", "stop after the iteration that is a multiple of this (0: never)", cxxopts::value<std::string>()->default_value("0"))
      ("exit-duration-in-mins", "stop (saving first) after the iteration that ends this many minutes after the start (0: never)",
       cxxopts::value<std::string>()->default_value("0"));
}

void read_evaluation_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.eval_interval = flag_number<int64_t>(r, "eval-interval");
  a.eval_iters = flag_number<int64_t>(r, "eval-iters");
  a.exit_interval = flag_number<int64_t>(r, "exit-interval");
  a.exit_duration_in_mins = flag_number<double>(r, "exit-duration-in-mins");
  require(a.eval_interval > 0, "--eval-interval must be positive");
  require(a.eval_iters >= 0, "--eval-iters must be >= 0 (0: no validation)");
  require(a.exit_interval >= 0, "--exit-interval must be >= 0 (0: never)");
  require(a.exit_duration_in_mins >= 0, "--exit-duration-in-mins must be >= 0 (0: never)");
}

}  // namespace

FlagSection evaluation_section() { return {"evaluation", declare_evaluation_flags, read_evaluation_flags}; }

}  // namespace megacpp::settings
