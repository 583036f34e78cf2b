// TensorBoardWriter against an independent decoder (tests/reference/tensorboard_events.py:
// plain Python, its own CRC-32C and protobuf wire-format parser).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/metrics/crc32c.h"
#include "io/metrics/tensorboard_writer.h"
#include "tests/io/io_test_util.h"

namespace fs = std::filesystem;
using megacpp::io_test::CommandResult;
using megacpp::io_test::run_command;
using megacpp::io_test::TempDir;
using megacpp::io::metrics::TensorBoardWriter;

namespace {

CommandResult decode(const std::string& path) {
  return run_command(megacpp::io_test::reference_script("tensorboard_events.py") + " '" + path + "'");
}

std::vector<nlohmann::json> json_lines(const std::string& output) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '{') lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

struct Scalar {
  std::string tag;
  double value;
  int64_t step;
};

}  // namespace

TEST(TensorBoardCrc32c, KnownVectors) {
  using megacpp::io::metrics::crc32c;
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of 0xFF.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  // Extending a CRC equals the CRC of the concatenation.
  EXPECT_EQ(crc32c("6789", 4, crc32c("12345")), 0xE3069283u);
  EXPECT_EQ(megacpp::io::metrics::mask_crc32c(0), 0xa282ead8u);
}

TEST(TensorBoardWriter, FileNameFollowsTensorBoardConvention) {
  TempDir tmp;
  const fs::path log_dir = tmp.path() / "run" / "nested";  // parents are created
  TensorBoardWriter writer(log_dir.string());
  const fs::path file(writer.path());
  EXPECT_EQ(file.parent_path(), log_dir);
  EXPECT_TRUE(fs::is_regular_file(file));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::regex pattern(R"(events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+))");
  std::smatch m;
  const std::string name = file.filename().string();
  ASSERT_TRUE(std::regex_match(name, m, pattern)) << name;
  EXPECT_EQ(m[2].str(), host);
  EXPECT_EQ(m[3].str(), std::to_string(getpid()));
  const long long seconds = std::stoll(m[1].str());
  EXPECT_LE(std::llabs(seconds - static_cast<long long>(std::time(nullptr))), 5);

  // A second writer in the same directory (and likely the same second) gets its own file.
  TensorBoardWriter other(log_dir.string());
  EXPECT_NE(other.path(), writer.path());
}

TEST(TensorBoardWriter, PythonDecoderReadsScalarsExactly) {
  TempDir tmp;
  const std::vector<Scalar> scalars = {
      {"loss/train", 10.375, 0},
      {"loss/train", 2.718281828459045, 1},
      {"lr", 3e-4, 1},
      {"loss/train", -1.5, 2},
      {"grad_norm", 1e-30, 3},                               // tiny
      {"grad_norm", 1.4e-45, 4},                             // float32 denormal
      {"tokens", 3.0e38, 5},                                 // near float32 max
      {"tokens_per_second", 123456789.0, 127},               // rounded to float32
      {"loss/val", 0.1, 128},                                // two-byte varint step
      {"loss/val", -0.0, 1LL << 40},                         // large step
      {"overflow", std::numeric_limits<double>::infinity(), 300},
      {"negative_step", 7.0, -3},                            // ten-byte varint
      {"unicode/\xC3\xA9t\xC3\xA9", 42.0, 9},
  };
  std::string path;
  {
    TensorBoardWriter writer((tmp.path() / "tb").string());
    path = writer.path();
    for (const auto& s : scalars) writer.add_scalar(s.tag, s.value, s.step);
  }  // the destructor flushes

  const CommandResult result = decode(path);
  ASSERT_EQ(result.status, 0) << result.output;
  const auto lines = json_lines(result.output);
  ASSERT_EQ(lines.size(), scalars.size() + 1) << result.output;

  EXPECT_EQ(lines[0].at("file_version"), "brain.Event:2");
  const double now = static_cast<double>(std::time(nullptr));
  const double first_wall_time = lines[0].at("wall_time").get<double>();
  EXPECT_NEAR(first_wall_time, now, 60.0);

  for (std::size_t i = 0; i < scalars.size(); ++i) {
    const auto& line = lines[i + 1];
    const auto& s = scalars[i];
    SCOPED_TRACE(line.dump());
    EXPECT_EQ(line.at("tag").get<std::string>(), s.tag);
    EXPECT_EQ(line.at("step").get<int64_t>(), s.step);
    const float expected = static_cast<float>(s.value);
    EXPECT_EQ(line.at("value_bits").get<uint32_t>(), float_bits(expected));
    if (std::isfinite(expected)) {
      EXPECT_EQ(line.at("value").get<double>(), static_cast<double>(expected));
    } else {
      EXPECT_EQ(line.at("value").get<std::string>(), "inf");
    }
    const double wall_time = line.at("wall_time").get<double>();
    EXPECT_GE(wall_time, first_wall_time);
    EXPECT_NEAR(wall_time, now, 60.0);
  }
}

TEST(TensorBoardWriter, FlushMakesEventsVisibleWhileOpen) {
  TempDir tmp;
  TensorBoardWriter writer(tmp.path().string());
  writer.add_scalar("a", 1.0, 1);
  writer.flush();
  // Decoding the directory finds the writer's file.
  auto result = decode(tmp.path().string());
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_EQ(json_lines(result.output).size(), 2u) << result.output;

  writer.add_scalar("a", 2.0, 2);
  writer.add_scalar("b", 3.0, 2);
  writer.flush();
  result = decode(writer.path());
  ASSERT_EQ(result.status, 0) << result.output;
  const auto lines = json_lines(result.output);
  ASSERT_EQ(lines.size(), 4u) << result.output;
  EXPECT_EQ(lines[3].at("tag"), "b");
  EXPECT_EQ(lines[3].at("value").get<double>(), 3.0);
}

TEST(TensorBoardWriter, PythonDecoderRejectsCorruptedBytes) {
  TempDir tmp;
  std::string path;
  {
    TensorBoardWriter writer(tmp.path().string());
    path = writer.path();
    writer.add_scalar("loss", 1.25, 10);
  }
  std::string original;
  {
    std::ifstream in(path, std::ios::binary);
    original.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_EQ(decode(path).status, 0);

  // The last record: 8 length bytes, 4 length CRC bytes, data, 4 data CRC bytes. Flip one bit
  // in its length, in its data (the float) and in its data CRC.
  uint64_t first_length = 0;
  std::memcpy(&first_length, original.data(), 8);  // little-endian host (x86-64, aarch64)
  const std::size_t second = 16 + first_length;
  ASSERT_LT(second + 16, original.size());
  struct Corruption {
    std::size_t offset;
    const char* expect;
  };
  const std::vector<Corruption> corruptions = {
      {second + 1, "length CRC"},          // length field
      {second + 8, "length CRC"},          // length CRC itself
      {original.size() - 6, "data CRC"},   // inside the float value
      {original.size() - 2, "data CRC"},   // the data CRC itself
      {3, "length CRC"},                   // the file_version record
  };
  for (const auto& c : corruptions) {
    std::string bytes = original;
    bytes[c.offset] = static_cast<char>(bytes[c.offset] ^ 0x10);
    const std::string corrupt = (tmp.path() / "corrupt.bin").string();
    std::ofstream(corrupt, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
    const CommandResult result = decode(corrupt);
    EXPECT_EQ(result.status, 1) << "offset " << c.offset << ": " << result.output;
    EXPECT_NE(result.output.find(c.expect), std::string::npos) << result.output;
  }

  // A truncated file (writer killed mid-record) is an error too.
  const std::string truncated = (tmp.path() / "truncated.bin").string();
  std::ofstream(truncated, std::ios::binary).write(original.data(), original.size() - 3);
  const CommandResult result = decode(truncated);
  EXPECT_EQ(result.status, 1) << result.output;
  EXPECT_NE(result.output.find("truncated"), std::string::npos) << result.output;
}

TEST(TensorBoardWriter, ThrowsNamingTheDirectoryItCannotCreate) {
  TempDir tmp;
  const fs::path blocker = tmp.path() / "not_a_directory";
  std::ofstream(blocker) << "x";
  const std::string log_dir = (blocker / "logs").string();
  try {
    TensorBoardWriter writer(log_dir);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(log_dir), std::string::npos) << e.what();
  }
  // The log directory path itself being a regular file.
  try {
    TensorBoardWriter writer(blocker.string());
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(blocker.string()), std::string::npos) << e.what();
  }
}
