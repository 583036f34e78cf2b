#include "tests/support/train_run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <regex>
#include <utility>

#include "io/checkpoint/layout.h"
#include "checkpoint/tensor_convert.h"
#include "io/serialization/torch_save.h"

namespace megacpp::testing {

TrainRun train(int ranks, const std::string& flags) { return train_with(MEGACPP_TRAIN_BINARY, ranks, flags); }

TrainRun train_with(const std::string& program, int ranks, const std::string& flags) {
  const std::string command = std::string(MEGACPP_RUN_BINARY) + " --nproc-per-node " + std::to_string(ranks) +
                              " --master-port 0 " + program + " " + flags;
  return parse_training_output(run_command(command));
}

TrainRun parse_training_output(CommandResult result) {
  TrainRun run;
  run.result = std::move(result);
  const std::string& out = run.result.output;
  static const std::regex loss(R"(\| lm loss: ([0-9.]+E[-+][0-9]+))");
  static const std::regex balance(R"(\| load_balancing_loss: ([0-9.]+E[-+][0-9]+))");
  static const std::regex validation(R"(validation loss at ([^|]*[^ |]) \| lm loss value: ([0-9.]+E[-+][0-9]+))");
  static const std::regex memory(
      R"(\[rank \d+\] memory \(MB\) \| sharded params: ([0-9.]+) \| sharded grads: ([0-9.]+) \| optimizer state: ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), loss); it != std::sregex_iterator(); ++it) {
    run.losses.push_back(std::stod((*it)[1]));
  }
  for (auto it = std::sregex_iterator(out.begin(), out.end(), balance); it != std::sregex_iterator(); ++it) {
    run.balance_losses.push_back(std::stod((*it)[1]));
  }
  for (auto it = std::sregex_iterator(out.begin(), out.end(), validation); it != std::sregex_iterator(); ++it) {
    run.validation.emplace_back((*it)[1], std::stod((*it)[2]));
  }
  for (auto it = std::sregex_iterator(out.begin(), out.end(), memory); it != std::sregex_iterator(); ++it) {
    run.memory.push_back({std::stod((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3])});
  }
  return run;
}

TrainRun iterations_after(const TrainRun& run, size_t from) {
  TrainRun t = run;
  t.losses.assign(run.losses.begin() + static_cast<long>(from), run.losses.end());
  t.validation.clear();
  for (const auto& [where, loss] : run.validation) {
    const bool before = where.rfind("iteration ", 0) == 0 && std::stoul(where.substr(10)) <= from;
    if (!before) t.validation.emplace_back(where, loss);
  }
  return t;
}

void expect_same_params(const std::string& reference_path, const std::string& path, const std::string& what) {
  auto reference = read_tensor_dict(reference_path), params = read_tensor_dict(path);
  ASSERT_GT(reference.size(), 0u);
  ASSERT_EQ(params.size(), reference.size()) << what;
  for (const auto& [name, expected] : reference) {
    ASSERT_TRUE(params.count(name)) << what << ": missing " << name;
    const at::Tensor& p = params.at(name);
    ASSERT_EQ(p.sizes(), expected.sizes()) << what << ": " << name;
    // Adam moves an element whose gradient is near zero by up to the learning rate whatever the
    // gradient's size, so a 1e-7 relative round-off difference upstream (sums in another order on
    // another CPU) can move such an element by ~1e-6: the absolute tolerance sits above that and
    // far below the 1e-3-sized learning rates the tests train with.
    EXPECT_TRUE(p.allclose(expected, 1e-4, 1e-5)) << what << ": " << name << " max diff " << (p - expected).abs().max().item<double>();
  }
}

void expect_same_losses(const TrainRun& reference, const TrainRun& run, const std::string& what, double rtol) {
  ASSERT_EQ(run.result.status, 0) << what << "\n" << run.result.output;
  ASSERT_EQ(run.losses.size(), reference.losses.size()) << what << "\n" << run.result.output;
  for (size_t i = 0; i < run.losses.size(); ++i) {
    EXPECT_LE(std::abs(run.losses[i] - reference.losses[i]), rtol * std::abs(reference.losses[i]))
        << what << ": iteration " << i + 1 << " loss " << run.losses[i] << " vs " << reference.losses[i];
  }
  ASSERT_EQ(run.balance_losses.size(), reference.balance_losses.size()) << what << "\n" << run.result.output;
  for (size_t i = 0; i < run.balance_losses.size(); ++i) {
    EXPECT_LE(std::abs(run.balance_losses[i] - reference.balance_losses[i]), rtol * std::abs(reference.balance_losses[i]))
        << what << ": iteration " << i + 1 << " load_balancing_loss " << run.balance_losses[i] << " vs "
        << reference.balance_losses[i];
  }
  ASSERT_EQ(run.validation.size(), reference.validation.size()) << what << "\n" << run.result.output;
  for (size_t i = 0; i < run.validation.size(); ++i) {
    EXPECT_EQ(run.validation[i].first, reference.validation[i].first) << what;
    EXPECT_LE(std::abs(run.validation[i].second - reference.validation[i].second), rtol * std::abs(reference.validation[i].second))
        << what << ": validation at " << run.validation[i].first << ": " << run.validation[i].second << " vs "
        << reference.validation[i].second;
  }
}

std::map<std::string, at::Tensor> read_tensor_dict(const std::string& path) {
  std::map<std::string, at::Tensor> tensors;
  const io::serialization::PyValue dict = io::serialization::torch_load(io::checkpoint::read_whole_file(path), path);
  for (const auto& [name, value] : dict.dict_items()) tensors[name.as_string()] = checkpoint::from_raw(value.tensor());
  return tensors;
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

CommandResult convert(const std::string& args) { return run_command(std::string(MEGACPP_CONVERT_BINARY) + " " + args); }

std::string fsdp_flags(const std::string& dir, const std::string& name, const std::string& yaml) {
  return " --use-torch-fsdp2 --fsdp2-config-path " + write_file(dir, name, yaml);
}

void expect_trained(const TrainRun& run, size_t iterations) {
  ASSERT_EQ(run.result.status, 0) << run.result.output;
  ASSERT_EQ(run.losses.size(), iterations) << run.result.output;
  for (double loss : run.losses) EXPECT_TRUE(std::isfinite(loss) && loss > 0) << run.result.output;
}

std::map<std::pair<std::string, int64_t>, double> read_tensorboard(const std::string& dir) {
  const auto decoded = run_command(reference_script("tensorboard_events.py") + " " + dir);
  EXPECT_EQ(decoded.status, 0) << decoded.output;
  std::map<std::pair<std::string, int64_t>, double> values;
  static const std::regex event(R"re("step": (-?\d+), "tag": "([^"]*)", "value": ([-0-9.eE+]+|NaN|Infinity))re");
  std::istringstream lines(decoded.output);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, event)) values[{m[2], std::stoll(m[1])}] = std::stod(m[3]);
  }
  return values;
}

}  // namespace megacpp::testing
