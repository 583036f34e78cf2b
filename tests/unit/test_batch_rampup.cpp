// Megatron's --rampup-batch-size arithmetic (RampupBatchsizeNumMicroBatchesCalculator and
// update_train_iters), worked by hand.
#include <gtest/gtest.h>

#include "settings/batch_rampup.h"

namespace megacpp {
namespace {

settings::TrainingArguments ramp(std::vector<int64_t> values) {
  settings::TrainingArguments a;
  a.rampup_batch_size = std::move(values);
  return a;
}

TEST(BatchRampup, GrowsByTheIncrementEverySamplesPerIncrementAsMegatron) {
  // 4 -> 16 by 4: three increments over 40 samples, one every 13.33 samples.
  const settings::BatchRampup r(ramp({4, 4, 40}), 16, 2);
  ASSERT_TRUE(r.ramps());
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 4}, {12, 4}, {13, 4}, {14, 8}, {26, 8}, {27, 12}, {39, 12}, {40, 16}, {41, 16}, {1000, 16}};
  for (const auto& [consumed, batch] : expected) EXPECT_EQ(r.batch_at(consumed), batch) << consumed;
  EXPECT_EQ(r.accumulation_at(30), 6);
  // Iterations read 4, 4, 4, 4 (16), 8 (24), 8 (32), 12 (44 > 40: the ramp is over), then 16s.
  EXPECT_EQ(r.iterations_for_samples(100), 10);
  EXPECT_EQ(r.samples_for_iterations(10), 92);
  EXPECT_EQ(r.samples_for_iterations(3), 12);
  EXPECT_EQ(r.iterations_for_samples(10), 2);  // the third batch of 4 passes 10: Python's floor division takes it back
  const settings::BatchRampup none(settings::TrainingArguments(), 16, 2);
  EXPECT_FALSE(none.ramps());
  EXPECT_EQ(none.batch_at(0), 16);
  EXPECT_EQ(none.samples_for_iterations(3), 48);
}

TEST(BatchRampup, RefusesRampsThatDoNotFitByName) {
  for (const auto& [values, message] : std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{16, 4, 40}, "must be below --global-batch-size (16)"},
           {{4, 5, 40}, "the increment must divide --global-batch-size minus the start (12)"},
           {{3, 13, 40}, "the batch of 3 samples is not a whole number of micro-batches x data-parallel size (2)"},
       }) {
    try {
      settings::BatchRampup(ramp(values), 16, 2);
      ADD_FAILURE() << message;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--rampup-batch-size"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace megacpp
