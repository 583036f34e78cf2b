// io/serialization/safetensors: round trips, the reference writer's exact bytes (test vectors from
// huggingface/safetensors' own tests), agreement with an independent Python reader/writer
// (tests/reference/safetensors_reader.py: standard library + numpy), corrupt files, shards.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/serialization/safetensors.h"
#include "tests/io/io_test_util.h"

namespace fs = std::filesystem;
using megacpp::io::serialization::plan_safetensors_shards;
using megacpp::io::serialization::read_safetensors_index;
using megacpp::io::serialization::safetensors_layout_order;
using megacpp::io::serialization::save_safetensors_sharded;
using megacpp::io::serialization::SafetensorsCheckpoint;
using megacpp::io::serialization::SafetensorsFile;
using megacpp::io::serialization::SafetensorsIndex;
using megacpp::io::serialization::SafetensorsMetadata;
using megacpp::io::serialization::serialize_safetensors;
using megacpp::io::serialization::Tensor;
using megacpp::io::serialization::TensorView;
using megacpp::io::serialization::write_safetensors;
using megacpp::io::serialization::write_safetensors_index;
using megacpp::io_test::CommandResult;
using megacpp::io_test::read_bytes;
using megacpp::io_test::run_command;
using megacpp::io_test::TempDir;
using megacpp::io_test::write_bytes;

namespace {

// Runs the reference script; returns its JSON output (fails the test on a non-zero exit).
nlohmann::json reference(const std::string& command, const std::string& path) {
  const CommandResult r = run_command(megacpp::io_test::reference_script("safetensors_reader.py") + " " + command + " '" + path + "'");
  EXPECT_EQ(r.status, 0) << "safetensors_reader.py " << command << " " << path << ":\n" << r.output;
  if (r.status != 0) return nlohmann::json();
  return nlohmann::json::parse(r.output);
}


template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

uint16_t float_to_bf16(float f) {  // round to nearest even; the test values are finite
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float f16_to_float(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(1024 + mant, exp - 25);
  }
  return static_cast<float>(sign ? -v : v);
}

std::string hex(const uint8_t* data, std::size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    s.push_back(kHex[data[i] >> 4]);
    s.push_back(kHex[data[i] & 0xF]);
  }
  return s;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

nlohmann::json float_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// The element values as the Python script prints them (C order, flattened).
nlohmann::json values_json(const TensorView& t) {
  nlohmann::json out = nlohmann::json::array();
  const std::string& d = t.dtype;
  const uint8_t* p = t.data;
  const int bytes = megacpp::io::serialization::dtype_bits(d) / 8;
  const std::size_t n = bytes ? t.nbytes / bytes : 0;
  for (std::size_t i = 0; i < n; ++i, p += bytes) {
    if (d == "F32") out.push_back(float_json(load<float>(p)));
    else if (d == "F64") out.push_back(float_json(load<double>(p)));
    else if (d == "F16") out.push_back(float_json(f16_to_float(load<uint16_t>(p))));
    else if (d == "BF16") out.push_back(float_json(bf16_to_float(load<uint16_t>(p))));
    else if (d == "I64") out.push_back(load<int64_t>(p));
    else if (d == "U64") out.push_back(load<uint64_t>(p));
    else if (d == "I32") out.push_back(load<int32_t>(p));
    else if (d == "U32") out.push_back(load<uint32_t>(p));
    else if (d == "I16") out.push_back(load<int16_t>(p));
    else if (d == "U16") out.push_back(load<uint16_t>(p));
    else if (d == "I8") out.push_back(load<int8_t>(p));
    else if (d == "BOOL") out.push_back(*p != 0);
    else out.push_back(*p);  // U8 and the raw-byte dtypes
  }
  return out;
}


// A hand-made file: u64 header size (default: the header's length), header, data.
void write_raw(const std::string& path, const std::string& header, const std::string& data,
               std::optional<uint64_t> n = std::nullopt) {
  std::string bytes(8, '\0');
  const uint64_t size = n.value_or(header.size());
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(size >> (8 * i));
  write_bytes(path, bytes + header + data);
}

std::string open_error(const std::string& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<opened without error>";
}

void expect_contains(const std::string& text, std::initializer_list<std::string> parts) {
  for (const auto& part : parts) {
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
  }
}

// Many tensors: every dtype numpy knows, 0-d, empty, and an awkward name.
std::map<std::string, Tensor> sample_tensors() {
  std::map<std::string, Tensor> t;
  std::mt19937 rng(1234);
  auto random_bytes = [&](std::size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
  };
  t["layers.0.attention.wq.weight"] = {"F32", {8, 4}, bytes_of(std::vector<float>{
      0.f, 1.f, -2.5f, 1e-30f, 3.25f, -0.f, 7.f, 8.f, 9.f, 10.f, 11.f, 12.f, 13.f, 14.f, 15.f, 16.f,
      17.f, 18.f, 19.f, 20.f, 21.f, 22.f, 23.f, 24.f, 25.f, 26.f, 27.f, 28.f, 29.f, 30.f, 31.f, 32.f})};
  std::vector<uint16_t> bf16;
  for (float f : {1.f, -2.f, 0.5f, 3.140625f, -1e20f, 65536.f}) bf16.push_back(float_to_bf16(f));
  t["layers.0.norm.weight"] = {"BF16", {2, 3}, bytes_of(bf16)};
  t["layers.0.half"] = {"F16", {3}, bytes_of(std::vector<uint16_t>{0x3C00, 0xC000, 0x7BFF})};
  t["f64"] = {"F64", {2, 1}, bytes_of(std::vector<double>{M_PI, -1e300})};
  t["iteration"] = {"I64", {}, bytes_of(std::vector<int64_t>{-9000000000LL})};
  t["u64"] = {"U64", {1}, bytes_of(std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()})};
  t["i32"] = {"I32", {2, 2}, bytes_of(std::vector<int32_t>{-1, 0, std::numeric_limits<int32_t>::min(), 5})};
  t["u32"] = {"U32", {1}, bytes_of(std::vector<uint32_t>{4000000000u})};
  t["i16"] = {"I16", {3}, bytes_of(std::vector<int16_t>{-32768, 1, 32767})};
  t["u16"] = {"U16", {1}, bytes_of(std::vector<uint16_t>{65535})};
  t["i8"] = {"I8", {2}, bytes_of(std::vector<int8_t>{-128, 127})};
  t["u8"] = {"U8", {5}, random_bytes(5)};
  t["mask"] = {"BOOL", {2, 2}, {1, 0, 0, 1}};
  t["fp8"] = {"F8_E5M2", {3}, random_bytes(3)};
  t["empty"] = {"F32", {0}, {}};
  t["empty_3d"] = {"BF16", {2, 0, 3}, {}};
  t["empty_i8"] = {"I8", {0}, {}};
  t["scalar_f32"] = {"F32", {}, bytes_of(std::vector<float>{42.5f})};
  t["tok\xC3\xA9n \"q\"\\\n\x01"] = {"I32", {1}, bytes_of(std::vector<int32_t>{7})};
  return t;
}

std::map<std::string, TensorView> views_of(const std::map<std::string, Tensor>& tensors) {
  std::map<std::string, TensorView> v;
  for (const auto& [name, t] : tensors) v.emplace(name, t.view());
  return v;
}

void expect_same_tensor(const TensorView& got, const Tensor& want, const std::string& name) {
  EXPECT_EQ(got.dtype, want.dtype) << name;
  EXPECT_EQ(got.shape, want.shape) << name;
  ASSERT_EQ(got.nbytes, want.data.size()) << name;
  if (got.nbytes) EXPECT_EQ(std::memcmp(got.data, want.data.data(), got.nbytes), 0) << name;
}

std::vector<uint8_t> to_vector(std::initializer_list<int> bytes) {
  std::vector<uint8_t> out;
  for (int b : bytes) out.push_back(static_cast<uint8_t>(b));
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST(SafetensorsTest, DtypeTable) {
  using namespace megacpp::io::serialization;
  EXPECT_EQ(dtype_bits("F32"), 32);
  EXPECT_EQ(dtype_bits("BF16"), 16);
  EXPECT_EQ(dtype_bits("BOOL"), 8);
  EXPECT_EQ(dtype_bits("F4"), 4);
  EXPECT_EQ(dtype_bits("C64"), 64);
  EXPECT_TRUE(is_safetensors_dtype("F8_E4M3FNUZ"));
  EXPECT_FALSE(is_safetensors_dtype("f32"));
  EXPECT_FALSE(is_safetensors_dtype("Q4_0"));
  EXPECT_THROW(dtype_bits("FP32"), std::invalid_argument);
  // Increasing alignment, as the reference enum is declared.
  EXPECT_LT(dtype_rank("BOOL"), dtype_rank("U8"));
  EXPECT_LT(dtype_rank("I8"), dtype_rank("F8_E4M3"));
  EXPECT_LT(dtype_rank("F16"), dtype_rank("BF16"));
  EXPECT_LT(dtype_rank("F32"), dtype_rank("C64"));
  EXPECT_LT(dtype_rank("F64"), dtype_rank("I64"));
  EXPECT_LT(dtype_rank("I64"), dtype_rank("U64"));
  EXPECT_EQ(tensor_nbytes("F32", {}), 4u);  // 0-d: one element
  EXPECT_EQ(tensor_nbytes("BF16", {3, 0, 2}), 0u);
  EXPECT_EQ(tensor_nbytes("F4", {4}), 2u);
  EXPECT_THROW(tensor_nbytes("F4", {3}), std::invalid_argument);  // 12 bits
  EXPECT_THROW(tensor_nbytes("F32", {2, -1}), std::invalid_argument);
  EXPECT_THROW(tensor_nbytes("F64", {int64_t{1} << 40, int64_t{1} << 40}), std::invalid_argument);
}

// Byte vectors from huggingface/safetensors' own tests (tensor.rs: test_serialization,
// test_serialization_forced_alignement, test_empty).
TEST(SafetensorsTest, MatchesReferenceSerializerTestVectors) {
  const auto data = bytes_of(std::vector<float>{0, 1, 2, 3, 4, 5});
  {
    const std::map<std::string, TensorView> t{{"attn.0", {"F32", {1, 2, 3}, data.data(), data.size()}}};
    const auto expected = to_vector(
        {64,  0,   0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,  34,  58,  123, 34,
         100, 116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,  44,  34,  115, 104, 97,  112, 101, 34,
         58,  91,  49,  44,  50,  44,  51,  93,  44,  34,  100, 97,  116, 97,  95,  111, 102, 102, 115, 101,
         116, 115, 34,  58,  91,  48,  44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
         0,   0,   0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64});
    EXPECT_EQ(serialize_safetensors(t), expected);
  }
  {
    const std::map<std::string, TensorView> t{{"attn0", {"F32", {1, 1, 2, 3}, data.data(), data.size()}}};
    const auto expected = to_vector(
        {72,  0,   0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 48,  34,  58,  123, 34,  100,
         116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,  44,  34,  115, 104, 97,  112, 101, 34,  58,
         91,  49,  44,  49,  44,  50,  44,  51,  93,  44,  34,  100, 97,  116, 97,  95,  111, 102, 102, 115,
         101, 116, 115, 34,  58,  91,  48,  44,  50,  52,  93,  125, 125, 32,  32,  32,  32,  32,  32,  32,
         0,   0,   0,   0,   0,   0,   128, 63,  0,   0,   0,   64,  0,   0,   64,  64,  0,   0,   128, 64,
         0,   0,   160, 64});
    EXPECT_EQ(serialize_safetensors(t), expected);
  }
  EXPECT_EQ(serialize_safetensors({}), to_vector({8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}));
  EXPECT_EQ(serialize_safetensors({}, SafetensorsMetadata{{"framework", "pt"}}),
            to_vector({40,  0,   0,  0,   0,   0,   0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
                       100, 97,  116, 97, 95,  95,  34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
                       111, 114, 107, 34, 58,  34,  112, 116, 34,  125, 125, 32,  32,  32,  32,  32}));
}

TEST(SafetensorsTest, LayoutOrderIsDescendingDtypeThenName) {
  const uint8_t z[16] = {};
  const std::map<std::string, TensorView> t{
      {"b", {"F32", {1}, z, 4}},   {"a", {"F32", {1}, z, 4}},   {"c", {"BF16", {1}, z, 2}},
      {"d", {"I64", {1}, z, 8}},   {"e", {"U8", {1}, z, 1}},    {"f", {"BOOL", {1}, z, 1}},
      {"g", {"F16", {1}, z, 2}},   {"h", {"F64", {1}, z, 8}},   {"B", {"F32", {1}, z, 4}},
      {"i", {"I32", {0}, z, 0}},   {"j", {"U64", {}, z, 8}},    {"k", {"F8_E4M3", {1}, z, 1}},
  };
  const std::vector<std::string> expected{"j", "d", "h", "B", "a", "b", "i", "c", "g", "k", "e", "f"};
  EXPECT_EQ(safetensors_layout_order(t), expected);

  TempDir dir;
  write_safetensors(dir / "order.safetensors", t);
  const auto f = SafetensorsFile::open(dir / "order.safetensors");
  EXPECT_EQ(f.names_in_file_order(), expected);
  EXPECT_EQ(f.data_offsets("j"), std::make_pair(uint64_t{0}, uint64_t{8}));
  EXPECT_EQ(f.data_offsets("d"), std::make_pair(uint64_t{8}, uint64_t{16}));
}

// A safetensors file cut short while its weights are read names the file and the byte (issue 31).
TEST(SafetensorsDeathTest, AFileTruncatedUnderTheReaderIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir dir;
  const std::string path = dir / "shrinking.safetensors";
  write_safetensors(path, std::map<std::string, Tensor>{{"w", Tensor{"F32", {2}, std::vector<uint8_t>(8, 1)}}}, SafetensorsMetadata{});
  const auto f = SafetensorsFile::open(path);
  fs::resize_file(path, 0);
  EXPECT_EXIT(
      {
        volatile uint8_t first = f.tensor("w").data[0];
        (void)first;
      },
      ::testing::ExitedWithCode(1),
      "shrinking.safetensors: reading byte " + std::to_string(f.data_start()) + " of it failed \\(SIGBUS\\): the file is shorter");
}

TEST(SafetensorsTest, RoundTripAllDtypesAndShapes) {
  TempDir dir;
  const auto tensors = sample_tensors();
  const std::string path = dir / "model.safetensors";
  write_safetensors(path, tensors, SafetensorsMetadata{{"format", "pt"}, {"megacpp", "1"}});
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f.size(), tensors.size());
  EXPECT_TRUE(f.has_metadata());
  EXPECT_EQ(f.metadata(), (SafetensorsMetadata{{"format", "pt"}, {"megacpp", "1"}}));
  EXPECT_EQ(f.header_size() % 8, 0u);
  EXPECT_EQ(f.data_start() % 8, 0u);
  EXPECT_EQ(f.file_size(), fs::file_size(path));
  std::vector<std::string> names;
  for (const auto& kv : tensors) names.push_back(kv.first);
  EXPECT_EQ(f.names(), names);
  EXPECT_EQ(f.names_in_file_order(), safetensors_layout_order(views_of(tensors)));
  for (const auto& [name, want] : tensors) {
    ASSERT_TRUE(f.contains(name)) << name;
    expect_same_tensor(f.tensor(name), want, name);
  }
  EXPECT_EQ(f.tensor("iteration").numel(), 1);
  EXPECT_EQ(f.tensor("empty_3d").numel(), 0);
  // Rewriting what was read gives the same bytes.
  std::map<std::string, TensorView> read_back;
  for (const auto& name : f.names()) read_back.emplace(name, f.tensor(name));
  const auto again = serialize_safetensors(read_back, f.metadata());
  EXPECT_EQ(std::string(again.begin(), again.end()), read_bytes(path));

  // A file with no tensors at all.
  write_safetensors(dir / "none.safetensors", std::map<std::string, Tensor>{});
  const auto none = SafetensorsFile::open(dir / "none.safetensors");
  EXPECT_EQ(none.size(), 0u);
  EXPECT_FALSE(none.has_metadata());
}

TEST(SafetensorsTest, MetadataAbsentVersusEmpty) {
  TempDir dir;
  const std::map<std::string, Tensor> t{{"x", {"F32", {1}, bytes_of(std::vector<float>{1.f})}}};
  write_safetensors(dir / "a.safetensors", t);
  write_safetensors(dir / "b.safetensors", t, SafetensorsMetadata{});
  EXPECT_FALSE(SafetensorsFile::open(dir / "a.safetensors").has_metadata());
  const auto b = SafetensorsFile::open(dir / "b.safetensors");
  EXPECT_TRUE(b.has_metadata());
  EXPECT_TRUE(b.metadata().empty());
  EXPECT_NE(read_bytes(dir / "b.safetensors").find("{\"__metadata__\":{},\"x\":"), std::string::npos);
}

TEST(SafetensorsTest, WriteReplacesAtomicallyAndReportsFailures) {
  TempDir dir;
  const std::string path = dir / "w.safetensors";
  write_safetensors(path, std::map<std::string, Tensor>{{"x", {"F32", {2}, bytes_of(std::vector<float>{1, 2})}}});
  write_safetensors(path, std::map<std::string, Tensor>{{"y", {"I8", {1}, {5}}}});
  const auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f.names(), std::vector<std::string>{"y"});
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const std::string missing = dir / "no/such/dir/w.safetensors";
  try {
    write_safetensors(missing, std::map<std::string, Tensor>{{"x", {"I8", {1}, {5}}}});
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    expect_contains(e.what(), {missing + ".tmp"});
  }
}

TEST(SafetensorsTest, WriterRejectsInconsistentTensors) {
  TempDir dir;
  const std::string path = dir / "bad.safetensors";
  auto error_of = [&](const std::map<std::string, Tensor>& t) -> std::string {
    try {
      write_safetensors(path, t);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "<no error>";
  };
  expect_contains(error_of({{"w", {"F32", {2, 2}, std::vector<uint8_t>(12)}}}),
                  {"'w'", "12 bytes", "F32", "[2, 2]", "need 16"});
  expect_contains(error_of({{"w", {"FP32", {1}, std::vector<uint8_t>(4)}}}), {"'w'", "FP32"});
  expect_contains(error_of({{"w", {"F32", {-1}, {}}}}), {"'w'", "negative"});
  expect_contains(error_of({{"__metadata__", {"F32", {1}, std::vector<uint8_t>(4)}}}), {"reserved"});
  expect_contains(error_of({{"bad\xFF", {"F32", {1}, std::vector<uint8_t>(4)}}}), {"UTF-8"});
  const std::map<std::string, TensorView> null_data{{"n", {"F32", {1}, nullptr, 4}}};
  EXPECT_THROW(write_safetensors(path, null_data), std::invalid_argument);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(SafetensorsTest, IndependentPythonReaderAgreesWithCppWriter) {
  TempDir dir;
  const auto tensors = sample_tensors();
  const std::string path = dir / "cpp.safetensors";
  write_safetensors(path, tensors, SafetensorsMetadata{{"format", "pt"}});
  const nlohmann::json dump = reference("dump", path);
  ASSERT_TRUE(dump.is_object());
  EXPECT_TRUE(dump["reserialized_identical"].get<bool>()) << "bytes differ from the reference serializer";
  EXPECT_TRUE(dump["header_aligned"].get<bool>());
  EXPECT_EQ(dump["metadata"], (nlohmann::json{{"format", "pt"}}));
  const auto order = safetensors_layout_order(views_of(tensors));
  EXPECT_EQ(dump["file_order"].get<std::vector<std::string>>(), order);
  EXPECT_EQ(dump["reference_order"].get<std::vector<std::string>>(), order);
  const auto f = SafetensorsFile::open(path);
  EXPECT_EQ(dump["header_size"].get<uint64_t>(), f.header_size());
  ASSERT_EQ(dump["tensors"].size(), tensors.size());
  for (const auto& [name, want] : tensors) {
    SCOPED_TRACE(name);
    const auto& t = dump["tensors"].at(name);
    EXPECT_EQ(t["dtype"], want.dtype);
    EXPECT_EQ(t["shape"].get<std::vector<int64_t>>(), want.shape);
    EXPECT_EQ(t["hex"], hex(want.data.data(), want.data.size()));
    EXPECT_EQ(t["values"], values_json(want.view()));
    const auto offsets = f.data_offsets(name);
    EXPECT_EQ(t["data_offsets"], (nlohmann::json{offsets.first, offsets.second}));
  }
  // Spot-check decoded values against what was written.
  EXPECT_EQ(dump["tensors"]["layers.0.norm.weight"]["values"][3], 3.140625);
  EXPECT_EQ(dump["tensors"]["iteration"]["values"], (nlohmann::json{-9000000000LL}));
  EXPECT_EQ(dump["tensors"]["mask"]["values"], (nlohmann::json{true, false, false, true}));
  EXPECT_EQ(dump["tensors"]["layers.0.half"]["values"], (nlohmann::json{1.0, -2.0, 65504.0}));
}

TEST(SafetensorsTest, CppReadsFileWrittenByPythonExactly) {
  TempDir dir;
  const std::string path = dir / "py.safetensors";
  const nlohmann::json desc = reference("write", path);
  ASSERT_TRUE(desc.is_object());
  const auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata(), (SafetensorsMetadata{{"format", "pt"}}));
  EXPECT_EQ(f.names_in_file_order(), desc["file_order"].get<std::vector<std::string>>());
  ASSERT_EQ(f.size(), desc["tensors"].size());
  std::map<std::string, TensorView> views;
  for (const auto& [name, t] : desc["tensors"].items()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(f.contains(name));
    const TensorView v = f.tensor(name);
    EXPECT_EQ(v.dtype, t["dtype"].get<std::string>());
    EXPECT_EQ(v.shape, t["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(hex(v.data, v.nbytes), t["hex"].get<std::string>());
    EXPECT_EQ(values_json(v), t["values"]);
    views.emplace(name, v);
  }
  EXPECT_TRUE(f.contains("caf\xC3\xA9.\xCE\xB1\"quoted\"\\back\nline\t\x01"));
  EXPECT_EQ(f.tensor("step").shape, std::vector<int64_t>{});
  EXPECT_EQ(load<int64_t>(f.tensor("step").data), 1234567890123LL);
  EXPECT_EQ(f.tensor("zero_rows").nbytes, 0u);
  // Our writer, given the same tensors and metadata, produces the very same file.
  const auto ours = serialize_safetensors(views, f.metadata());
  EXPECT_EQ(std::string(ours.begin(), ours.end()), read_bytes(path));
}

// ---- corrupt files: every error names the file, and the tensor where one is at fault --------

class SafetensorsCorruptionTest : public ::testing::Test {
 protected:
  TempDir dir_;
  const std::string path_ = dir_ / "corrupt.safetensors";

  std::string error() { return open_error(path_); }
};

TEST_F(SafetensorsCorruptionTest, TruncatedFile) {
  const auto tensors = sample_tensors();
  write_safetensors(path_, tensors);
  const std::string full = read_bytes(path_);
  // Cut inside the data: the last tensor in the file runs past the end.
  write_bytes(path_, full.substr(0, full.size() - 1));
  const std::string last = safetensors_layout_order(views_of(tensors)).back();
  expect_contains(error(), {path_, "tensor '" + last + "'", "out of range"});
  // Cut inside the header.
  write_bytes(path_, full.substr(0, 40));
  expect_contains(error(), {path_, "runs past the end", "truncated"});
  // Cut inside the size.
  write_bytes(path_, full.substr(0, 5));
  expect_contains(error(), {path_, "too small"});
  write_bytes(path_, "");
  expect_contains(error(), {path_, "too small"});
}

TEST_F(SafetensorsCorruptionTest, HeaderSizeLargerThanFile) {
  write_raw(path_, "{}", "", 4096);
  expect_contains(error(), {path_, "header size 4096", "runs past the end"});
  write_raw(path_, "{}", "", uint64_t{1} << 62);
  expect_contains(error(), {path_, "over the format's limit"});
}

TEST_F(SafetensorsCorruptionTest, BadJson) {
  write_raw(path_, "{\"w\": {\"dtype\": \"F32\", ", "");
  expect_contains(error(), {path_, "invalid JSON"});
  write_raw(path_, "[1, 2]  ", "");
  expect_contains(error(), {path_, "does not start with '{'"});
  write_raw(path_, std::string("{\"w\xC0\xAF\": 1}"), "");
  expect_contains(error(), {path_, "not valid UTF-8"});
  write_raw(path_, "{\"w\": 5}", "");
  expect_contains(error(), {path_, "tensor 'w'", "not an object"});
  write_raw(path_, "{\"__metadata__\": {\"step\": 5}}", "");
  expect_contains(error(), {path_, "__metadata__", "'step'"});
}

TEST_F(SafetensorsCorruptionTest, MissingOrBadFields) {
  const std::string data(16, '\0');
  write_raw(path_, R"({"w": {"shape": [4], "data_offsets": [0, 16]}})", data);
  expect_contains(error(), {path_, "tensor 'w'", "no dtype"});
  write_raw(path_, R"({"w": {"dtype": "F32", "data_offsets": [0, 16]}})", data);
  expect_contains(error(), {path_, "tensor 'w'", "no shape"});
  write_raw(path_, R"({"w": {"dtype": "F32", "shape": [4]}})", data);
  expect_contains(error(), {path_, "tensor 'w'", "no data_offsets"});
  write_raw(path_, R"({"w": {"dtype": "Q4", "shape": [4], "data_offsets": [0, 16]}})", data);
  expect_contains(error(), {path_, "tensor 'w'", "unknown dtype \"Q4\""});
  write_raw(path_, R"({"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})", data);
  expect_contains(error(), {path_, "tensor 'w'", "non-negative integers"});
  write_raw(path_, R"({"w": {"dtype": "F32", "shape": [4.0], "data_offsets": [0, 16]}})", data);
  expect_contains(error(), {path_, "tensor 'w'", "non-negative integers"});
  write_raw(path_, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0]}})", data);
  expect_contains(error(), {path_, "tensor 'w'", "data_offsets [0]"});
  write_raw(path_, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}})", data);
  expect_contains(error(), {path_, "tensor 'w'", "end before they begin"});
}

TEST_F(SafetensorsCorruptionTest, OffsetsOutOfRange) {
  write_raw(path_, R"({"w": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})", std::string(16, '\0'));
  expect_contains(error(), {path_, "tensor 'w'", "[0, 32]", "out of range", "16-byte"});
}

TEST_F(SafetensorsCorruptionTest, OverlappingTensors) {
  write_raw(path_,
            R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
            R"( "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
            std::string(24, '\0'));
  expect_contains(error(), {path_, "tensor 'b'", "overlap tensor 'a'"});
  // The same tensor twice.
  write_raw(path_,
            R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
            R"( "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
            std::string(16, '\0'));
  expect_contains(error(), {path_, "'a'", "more than once"});
}

TEST_F(SafetensorsCorruptionTest, HolesAndTrailingBytes) {
  write_raw(path_,
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
            R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}})",
            std::string(24, '\0'));
  expect_contains(error(), {path_, "tensor 'b'", "hole", "bytes [8, 16)"});
  write_raw(path_, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", std::string(12, '\0'));
  expect_contains(error(), {path_, "cover 8 bytes of the 12-byte", "'a'"});
}

TEST_F(SafetensorsCorruptionTest, WrongNbytes) {
  write_raw(path_, R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", std::string(12, '\0'));
  expect_contains(error(), {path_, "tensor 'w'", "span 12 bytes", "F32", "[2, 2]", "need 16"});
  write_raw(path_, R"({"w": {"dtype": "BF16", "shape": [], "data_offsets": [0, 4]}})", std::string(4, '\0'));
  expect_contains(error(), {path_, "tensor 'w'", "need 2"});
}

TEST_F(SafetensorsCorruptionTest, MissingTensorIsNamed) {
  write_safetensors(path_, std::map<std::string, Tensor>{{"x", {"I8", {1}, {5}}}});
  const auto f = SafetensorsFile::open(path_);
  try {
    f.tensor("y");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    expect_contains(e.what(), {path_, "'y'"});
  }
  expect_contains(open_error(dir_ / "absent.safetensors"), {dir_ / "absent.safetensors", "cannot open"});
}

// ---- shards ---------------------------------------------------------------------------------

TEST(SafetensorsShardTest, PlanMatchesHuggingFaceSplitter) {
  // huggingface_hub's docstring example: [6, 6, 2, 6, 2, 2] GB under 10 -> [6], [6+2], [6+2+2].
  auto plan = plan_safetensors_shards({{"a", 6}, {"b", 6}, {"c", 2}, {"d", 6}, {"e", 2}, {"f", 2}}, 10);
  ASSERT_EQ(plan.shards.size(), 3u);
  EXPECT_EQ(plan.shards[0], (std::vector<std::string>{"a"}));
  EXPECT_EQ(plan.shards[1], (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(plan.shards[2], (std::vector<std::string>{"d", "e", "f"}));
  EXPECT_EQ(plan.filenames, (std::vector<std::string>{"model-00001-of-00003.safetensors",
                                                      "model-00002-of-00003.safetensors",
                                                      "model-00003-of-00003.safetensors"}));
  EXPECT_EQ(plan.weight_map.at("c"), "model-00002-of-00003.safetensors");
  EXPECT_EQ(plan.total_size, 24u);
  EXPECT_TRUE(plan.is_sharded());

  // A tensor over the limit gets its own shard, appended ahead of the one being filled;
  // exactly reaching the limit still fits.
  plan = plan_safetensors_shards({{"t0", 3}, {"big", 20}, {"t2", 4}, {"t3", 3}, {"t4", 5}}, 10);
  ASSERT_EQ(plan.shards.size(), 3u);
  EXPECT_EQ(plan.shards[0], (std::vector<std::string>{"big"}));
  EXPECT_EQ(plan.shards[1], (std::vector<std::string>{"t0", "t2", "t3"}));
  EXPECT_EQ(plan.shards[2], (std::vector<std::string>{"t4"}));
  EXPECT_EQ(plan.weight_map.at("big"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(plan.total_size, 35u);

  plan = plan_safetensors_shards({{"x", 4}, {"y", 6}}, 10);
  EXPECT_EQ(plan.filenames, std::vector<std::string>{"model.safetensors"});
  EXPECT_FALSE(plan.is_sharded());

  EXPECT_THROW(plan_safetensors_shards({{"x", 1}, {"x", 1}}, 10), std::invalid_argument);
  EXPECT_THROW(plan_safetensors_shards({{"x", 1}}, 0), std::invalid_argument);
}

TEST(SafetensorsShardTest, ShardedIndexRoundTrip) {
  TempDir dir;
  const auto tensors = sample_tensors();
  std::vector<std::pair<std::string, TensorView>> ordered;
  for (const auto& [name, t] : tensors) ordered.emplace_back(name, t.view());
  const auto plan = save_safetensors_sharded(dir.path().string(), ordered, 40);
  ASSERT_TRUE(plan.is_sharded());
  ASSERT_GE(plan.filenames.size(), 3u);
  for (const auto& filename : plan.filenames) {
    EXPECT_TRUE(fs::exists(dir.path() / filename)) << filename;
    const auto shard = SafetensorsFile::open(dir / filename);
    EXPECT_EQ(shard.metadata(), (SafetensorsMetadata{{"format", "pt"}}));
  }
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors"));

  const SafetensorsIndex index = read_safetensors_index(dir / "model.safetensors.index.json");
  uint64_t total = 0;
  for (const auto& kv : tensors) total += kv.second.data.size();
  EXPECT_EQ(index.total_size(), total);
  EXPECT_EQ(index.weight_map, plan.weight_map);
  EXPECT_EQ(index.filenames().size(), plan.filenames.size());

  // The independent check: transformers' index text, shard names, contents and total_size.
  const nlohmann::json check = reference("index", dir.path().string());
  ASSERT_TRUE(check.is_object());
  EXPECT_EQ(check["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(check["shards"].size(), plan.filenames.size());

  const auto ckpt = SafetensorsCheckpoint::open(dir.path().string());
  EXPECT_TRUE(ckpt.is_sharded());
  std::vector<std::string> names;
  for (const auto& kv : tensors) names.push_back(kv.first);
  EXPECT_EQ(ckpt.names(), names);
  for (const auto& [name, want] : tensors) {
    expect_same_tensor(ckpt.tensor(name), want, name);
    EXPECT_EQ(ckpt.filename_of(name), plan.weight_map.at(name));
  }
}

TEST(SafetensorsShardTest, SingleShardWritesNoIndex) {
  TempDir dir;
  const auto tensors = sample_tensors();
  std::vector<std::pair<std::string, TensorView>> ordered;
  for (const auto& [name, t] : tensors) ordered.emplace_back(name, t.view());
  const auto plan = save_safetensors_sharded(dir.path().string(), ordered, uint64_t{5} << 30);
  EXPECT_FALSE(plan.is_sharded());
  EXPECT_TRUE(fs::exists(dir.path() / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
  const auto ckpt = SafetensorsCheckpoint::open(dir.path().string());
  EXPECT_FALSE(ckpt.is_sharded());
  EXPECT_EQ(ckpt.names().size(), tensors.size());
  EXPECT_EQ(ckpt.filename_of("f64"), "model.safetensors");
  expect_same_tensor(ckpt.tensor("f64"), tensors.at("f64"), "f64");
}

TEST(SafetensorsShardTest, IndexTextAndErrors) {
  TempDir dir;
  SafetensorsIndex index;
  index.metadata["total_size"] = 6;
  index.weight_map = {{"b.weight", "model-00002-of-00002.safetensors"},
                      {"a.w\xC3\xA9ight", "model-00001-of-00002.safetensors"}};
  const std::string path = dir / "model.safetensors.index.json";
  write_safetensors_index(path, index);
  // json.dumps(index, indent=2, sort_keys=True) + "\n", non-ASCII escaped.
  EXPECT_EQ(read_bytes(path),
            "{\n"
            "  \"metadata\": {\n"
            "    \"total_size\": 6\n"
            "  },\n"
            "  \"weight_map\": {\n"
            "    \"a.w\\u00e9ight\": \"model-00001-of-00002.safetensors\",\n"
            "    \"b.weight\": \"model-00002-of-00002.safetensors\"\n"
            "  }\n"
            "}\n");
  const auto back = read_safetensors_index(path);
  EXPECT_EQ(back.weight_map, index.weight_map);
  EXPECT_EQ(back.total_size(), 6u);

  // A tensor the index maps to a shard that lacks it.
  write_safetensors(dir / "model-00001-of-00002.safetensors",
                    std::map<std::string, Tensor>{{"a.w\xC3\xA9ight", {"U8", {3}, {1, 2, 3}}}});
  write_safetensors(dir / "model-00002-of-00002.safetensors",
                    std::map<std::string, Tensor>{{"c.weight", {"U8", {3}, {1, 2, 3}}}});
  try {
    SafetensorsCheckpoint::open(dir.path().string());
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    expect_contains(e.what(), {path, "'b.weight'", "model-00002-of-00002.safetensors"});
  }
  // A shard the index names but that is missing.
  fs::remove(dir / "model-00002-of-00002.safetensors");
  try {
    SafetensorsCheckpoint::open(dir.path().string());
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    expect_contains(e.what(), {dir / "model-00002-of-00002.safetensors", "cannot open"});
  }
  // Paths out of the directory, bad JSON, no weight_map.
  write_bytes(path, R"({"metadata": {}, "weight_map": {"x": "../model.safetensors"}})");
  expect_contains([&] {
    try { read_safetensors_index(path); } catch (const std::runtime_error& e) { return std::string(e.what()); }
    return std::string("<no error>");
  }(), {path, "'x'", "../model.safetensors"});
  write_bytes(path, R"({"metadata": {}, "weight_map": )");
  EXPECT_THROW(read_safetensors_index(path), std::runtime_error);
  write_bytes(path, R"({"metadata": {}})");
  EXPECT_THROW(read_safetensors_index(path), std::runtime_error);
  fs::remove(path);
  EXPECT_THROW(SafetensorsCheckpoint::open(dir.path().string()), std::runtime_error);
}
