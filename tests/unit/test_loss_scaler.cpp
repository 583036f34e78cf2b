// Megatron's DynamicGradScaler rules: halve after --hysteresis overflows (not below
// --min-loss-scale), double after --loss-scale-window clean iterations; --loss-scale is constant.
#include <gtest/gtest.h>

#include "training/optim/loss_scaler.h"

namespace megacpp {
namespace {

settings::TrainingArguments fp16(double initial, int64_t window, int64_t hysteresis, double min_scale = 1.0) {
  settings::TrainingArguments a;
  a.fp16 = true;
  a.initial_loss_scale = initial;
  a.loss_scale_window = window;
  a.hysteresis = hysteresis;
  a.min_loss_scale = min_scale;
  return a;
}

TEST(LossScaler, HalvesAfterHysteresisOverflowsAndDoublesAfterACleanWindow) {
  training::optim::LossScaler s(fp16(1024, 3, 2));
  ASSERT_TRUE(s.enabled());
  s.update(true);  // the first overflow is forgiven (hysteresis 2)
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);
  EXPECT_EQ(s.scale(), 512);
  s.update(true);  // the tracker stays spent until the scale grows again
  EXPECT_EQ(s.scale(), 256);
  for (int i = 0; i < 2; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 256);
  s.update(false);  // the third clean iteration in a row
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.state().hysteresis_tracker, 2);
  s.update(false);
  s.update(true);  // an overflow restarts the window
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 512);

  training::optim::LossScaler floor(fp16(4, 1000, 1, 2.0));
  for (int i = 0; i < 5; ++i) floor.update(true);
  EXPECT_EQ(floor.scale(), 2.0);
}

TEST(LossScaler, ConstantScaleAndNoScaler) {
  settings::TrainingArguments constant;
  constant.bf16 = true;
  constant.loss_scale = 128;
  training::optim::LossScaler c(constant);
  EXPECT_TRUE(c.enabled());
  c.update(true);
  EXPECT_EQ(c.scale(), 128);
  training::optim::LossScaler none{settings::TrainingArguments()};
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.scale(), 1.0);
}

}  // namespace
}  // namespace megacpp
