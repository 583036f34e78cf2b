// The README's quickstart job (scripts/quickstart.sh) on this build: it exits 0 and its
// validation loss ends at least 40% below its first value.
#include <gtest/gtest.h>

#include <regex>

#include "tests/support/distributed_test.h"

namespace megacpp {
namespace {

TEST(Quickstart, ValidationLossFallsByAtLeastFortyPercent) {
  const std::string train_binary = MEGACPP_TRAIN_BINARY;
  const std::string build_dir = train_binary.substr(0, train_binary.rfind('/'));
  const std::string work_dir = testing::scratch_dir();
  const auto result = testing::run_command("bash " + std::string(MEGACPP_SOURCE_DIR) + "/scripts/quickstart.sh " + build_dir +
                                           " " + work_dir);
  ASSERT_EQ(result.status, 0) << result.output;
  std::vector<double> validation;
  static const std::regex line(R"(validation loss at [^|]+\| lm loss value: ([0-9.]+E[-+][0-9]+))");
  for (auto it = std::sregex_iterator(result.output.begin(), result.output.end(), line); it != std::sregex_iterator(); ++it) {
    validation.push_back(std::stod((*it)[1]));
  }
  ASSERT_GE(validation.size(), 10u) << result.output;
  EXPECT_LE(validation.back(), 0.6 * validation.front()) << "first " << validation.front() << ", last " << validation.back();
  EXPECT_NE(result.output.find("tensorboard: writing " + work_dir + "/tensorboard/events.out.tfevents."), std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace megacpp
