// Images as CLIPImageProcessor prepares them (io/data/image_loader.h): channel conversion,
// the shorter side resized and the center cropped, rescaling and normalization; PNG and JPEG
// files decoded; packed images (io/data/packed_images.h) read back as written.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <stb_image_write.h>

#include "io/data/image_loader.h"
#include "io/data/packed_images.h"
#include "tests/io/io_test_util.h"

namespace megacpp::io_test {
namespace {

using io::data::ImageProcessing;

TEST(ImageLoader, ConvertsChannelsAndCropsTheCenterOfTheShorterSide) {
  // A 4x2 RGB image: already 2 high, so no resize, and the center 2 columns (1 and 2) are kept.
  std::vector<uint8_t> rgb;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 4; ++x)
      for (int c = 0; c < 3; ++c) rgb.push_back(static_cast<uint8_t>(100 * c + 10 * y + x));
  EXPECT_EQ(io::data::prepare_image(rgb.data(), 4, 2, 3, 2, 3),
            (std::vector<uint8_t>{1, 101, 201, 2, 102, 202, 11, 111, 211, 12, 112, 212}));
  // RGB to grey as PIL's luma, (19595 R + 38470 G + 7471 B + 2^15) >> 16; grey (and grey + alpha)
  // to RGB repeats.
  EXPECT_EQ(io::data::prepare_image(rgb.data(), 4, 2, 3, 2, 1), (std::vector<uint8_t>{83, 84, 93, 94}));
  const std::vector<uint8_t> grey_alpha = {7, 255, 9, 0};
  EXPECT_EQ(io::data::prepare_image(grey_alpha.data(), 2, 1, 2, 1, 3), (std::vector<uint8_t>{7, 7, 7}));
  // A flat 56x40 image resized (shorter side 40 -> 28, bicubic) and cropped stays flat.
  const std::vector<uint8_t> flat(56 * 40, 77);
  const std::vector<uint8_t> small = io::data::prepare_image(flat.data(), 56, 40, 1, 28, 1);
  ASSERT_EQ(small.size(), 28u * 28u);
  for (uint8_t v : small) EXPECT_EQ(v, 77);
}

TEST(ImageLoader, NormalizesPerChannelIntoChannelsFirst) {
  ImageProcessing p;
  p.size = 1;
  p.channels = 3;
  p.mean = {0.5, 0.0, 1.0};
  p.std = {0.5, 1.0, 2.0};
  const std::vector<uint8_t> pixel = {255, 51, 0};
  const std::vector<float> out = io::data::normalize_image(pixel.data(), p);
  EXPECT_FLOAT_EQ(out[0], 1.0f);   // (1 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(out[1], 0.2f);   // 0.2
  EXPECT_FLOAT_EQ(out[2], -0.5f);  // (0 - 1) / 2
}

TEST(ImageLoader, RefusesSettingsItCannotApply) {
  ImageProcessing p;
  p.channels = 2;
  EXPECT_NE(error_of([&] { io::data::check_image_processing(p); }).find("--num-channels must be 1 or 3, got 2"), std::string::npos);
  p.channels = 1;
  EXPECT_NE(error_of([&] { io::data::check_image_processing(p); }).find("--image-mean gives 3 different values for images of 1 channel"),
            std::string::npos)
      << "CLIP's RGB mean for a grey tower";
  p.mean = {0.3, 0.3, 0.3};
  p.std = {0.4, 0.4, 0.4};
  EXPECT_EQ(error_of([&] { io::data::check_image_processing(p); }), "");
  p.std = {0.0, 0.0, 0.0};
  EXPECT_NE(error_of([&] { io::data::check_image_processing(p); }).find("--image-std: each channel's std must be positive"), std::string::npos);
}

TEST(ImageLoader, DecodesPngExactlyAndJpegClosely) {
  TempDir dir;
  std::vector<uint8_t> rgb(28 * 28 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>((i * 7) % 256 / 4 + 64 * (i % 3));
  ASSERT_TRUE(stbi_write_png((dir / "a.png").c_str(), 28, 28, 3, rgb.data(), 28 * 3));
  ASSERT_TRUE(stbi_write_jpg((dir / "a.jpg").c_str(), 28, 28, 3, rgb.data(), 100));
  ImageProcessing p;
  p.size = 28;
  const std::vector<float> expected = io::data::normalize_image(rgb.data(), p);
  EXPECT_EQ(io::data::load_image(dir / "a.png", p, "x.jsonl:1"), expected);
  const std::vector<float> jpeg = io::data::load_image(dir / "a.jpg", p, "x.jsonl:1");
  double error = 0;
  for (size_t i = 0; i < jpeg.size(); ++i) error += std::abs(jpeg[i] - expected[i]);
  EXPECT_LT(error / jpeg.size(), 0.1) << "JPEG at quality 100: close, not exact";
  std::ofstream(dir / "bad.png") << "not an image";
  EXPECT_NE(error_of([&] { io::data::load_image(dir / "bad.png", p, "x.jsonl:3"); }).find("x.jsonl:3: cannot decode the image " + (dir / "bad.png")),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::data::load_image(dir / "none.png", p, "x.jsonl:4"); }).find("x.jsonl:4: cannot read the image"), std::string::npos);
}

TEST(PackedImages, ReadsBackWhatWasWrittenAndRefusesOtherFiles) {
  TempDir dir;
  io::data::PackedImagesWriter writer(dir / "p.pixels", 2, 1);
  writer.add({1, 2, 3, 4});
  writer.add({5, 6, 7, 8});
  writer.finish();
  const io::data::PackedImages packed(dir / "p.pixels");
  EXPECT_EQ(packed.count(), 2);
  EXPECT_EQ(packed.size(), 2);
  EXPECT_EQ(packed.channels(), 1);
  EXPECT_EQ(std::vector<uint8_t>(packed.image(1), packed.image(1) + 4), (std::vector<uint8_t>{5, 6, 7, 8}));
  EXPECT_THROW(packed.image(2), std::out_of_range);
  EXPECT_THROW(writer.add({1, 2, 3}), std::invalid_argument);
  std::ofstream(dir / "q.pixels") << "not packed";
  EXPECT_NE(error_of([&] { io::data::PackedImages q(dir / "q.pixels"); }).find("is not a packed-images file"), std::string::npos);
  const std::string bytes = read_bytes(dir / "p.pixels");
  std::ofstream(dir / "cut.pixels", std::ios::binary) << bytes.substr(0, bytes.size() - 1);
  EXPECT_NE(error_of([&] { io::data::PackedImages q(dir / "cut.pixels"); }).find("(cut short?)"), std::string::npos);
  std::string huge = bytes;
  for (int i = 0; i < 8; ++i) huge[8 + i] = static_cast<char>(0xff);  // a count that overflows the size
  std::ofstream(dir / "huge.pixels", std::ios::binary) << huge;
  EXPECT_NE(error_of([&] { io::data::PackedImages q(dir / "huge.pixels"); }).find("(cut short?)"), std::string::npos);
}

// A packed-images file cut short while a job reads it names the file and the image (issue 31).
TEST(PackedImagesDeathTest, AFileTruncatedUnderTheReaderIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir dir;
  io::data::PackedImagesWriter writer(dir / "shrinking.pixels", 2, 1);
  writer.add({1, 2, 3, 4});
  writer.finish();
  const io::data::PackedImages packed(dir / "shrinking.pixels");
  std::filesystem::resize_file(dir / "shrinking.pixels", 0);
  EXPECT_EXIT(
      {
        const io::serialization::MappedReadScope reading("image", int64_t{0});
        volatile uint8_t first = packed.image(0)[0];
        (void)first;
      },
      ::testing::ExitedWithCode(1), "shrinking.pixels: reading byte 40 of it failed \\(SIGBUS\\) while reading image 0: the file is shorter");
}

}  // namespace
}  // namespace megacpp::io_test
