// Token datasets: write -> read round trips for every dtype and both back ends, the .idx bytes
// field by field against Megatron's layout, HDF5 vs mmap parity, each corruption refused with
// a message naming the file, and datasets written by an independent Python/NumPy copy of
// Megatron's IndexedDatasetBuilder (tests/reference/megatron_indexed_writer.py) read back exactly.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/data/indexed_dataset.h"
#include "io/serialization/mapped_file_guard.h"
#include "tests/io/io_test_util.h"

namespace megacpp::io::data {
namespace {

using io_test::error_of;
using io_test::read_bytes;
using io_test::TempDir;
using io_test::write_bytes;

using Sequence = std::vector<int64_t>;
using Document = std::vector<Sequence>;

const TokenDtype kAllDtypes[] = {TokenDtype::kUInt8,  TokenDtype::kInt8,    TokenDtype::kInt16,
                                 TokenDtype::kUInt16, TokenDtype::kInt32,   TokenDtype::kInt64,
                                 TokenDtype::kFloat32, TokenDtype::kFloat64};

// Token values that `dtype` holds exactly, its extremes included.
std::pair<int64_t, int64_t> token_range(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUInt8: return {0, 255};
    case TokenDtype::kInt8: return {-128, 127};
    case TokenDtype::kInt16: return {-32768, 32767};
    case TokenDtype::kUInt16: return {0, 65535};
    case TokenDtype::kInt32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case TokenDtype::kInt64: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    case TokenDtype::kFloat32: return {-(int64_t{1} << 24), int64_t{1} << 24};
    case TokenDtype::kFloat64: return {-(int64_t{1} << 53), int64_t{1} << 53};
  }
  return {0, 0};
}

// Documents of 1-3 sequences of 0-40 tokens; the extremes of the range appear in document 0.
std::vector<Document> random_documents(TokenDtype dtype, int num_documents, uint64_t seed) {
  const auto [lo, hi] = token_range(dtype);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> token(lo, hi);
  std::uniform_int_distribution<int> sequences(1, 3), length(0, 40);
  std::vector<Document> documents(num_documents);
  for (auto& document : documents) {
    document.resize(sequences(rng));
    for (auto& sequence : document) {
      sequence.resize(length(rng));
      for (auto& t : sequence) t = token(rng);
    }
  }
  documents[0].push_back({lo, hi, 0});
  return documents;
}

void write_dataset(const std::string& path, TokenDtype dtype, const std::vector<Document>& documents) {
  auto writer = create_token_dataset(path, dtype);
  for (const auto& document : documents) {
    for (const auto& sequence : document) writer->add_sequence(sequence.data(), static_cast<int64_t>(sequence.size()));
    writer->end_document();
  }
  writer->finalize();
}

Sequence read_all(const TokenDataset& dataset, int64_t sequence) {
  Sequence out(dataset.sequence_length(sequence));
  dataset.read(sequence, 0, static_cast<int64_t>(out.size()), out.data());
  return out;
}

void expect_dataset(const TokenDataset& dataset, TokenDtype dtype, const std::vector<Document>& documents) {
  std::vector<Sequence> sequences;
  std::vector<int64_t> document_indices{0};
  int64_t tokens = 0;
  for (const auto& document : documents) {
    for (const auto& sequence : document) {
      sequences.push_back(sequence);
      tokens += static_cast<int64_t>(sequence.size());
    }
    document_indices.push_back(static_cast<int64_t>(sequences.size()));
  }
  EXPECT_EQ(dataset.dtype(), dtype);
  ASSERT_EQ(dataset.num_sequences(), static_cast<int64_t>(sequences.size()));
  EXPECT_EQ(dataset.document_indices(), document_indices);
  EXPECT_EQ(dataset.num_tokens(), tokens);
  for (size_t i = 0; i < sequences.size(); ++i) {
    ASSERT_EQ(read_all(dataset, static_cast<int64_t>(i)), sequences[i]) << "sequence " << i;
    // A window in the middle: offset 1, all but the first and last token.
    if (sequences[i].size() >= 3) {
      Sequence middle(sequences[i].size() - 2);
      dataset.read(static_cast<int64_t>(i), 1, static_cast<int64_t>(middle.size()), middle.data());
      EXPECT_EQ(middle, Sequence(sequences[i].begin() + 1, sequences[i].end() - 1)) << "sequence " << i;
    }
  }
}

class TokenDatasetRoundTrip : public ::testing::TestWithParam<std::tuple<TokenDtype, bool>> {};

TEST_P(TokenDatasetRoundTrip, ReadsBackWhatWasWritten) {
  const auto [dtype, hdf5] = GetParam();
  TempDir dir;
  const std::string path = hdf5 ? dir / "data.h5" : dir / "data";
  const auto documents = random_documents(dtype, 25, 1234 + static_cast<int>(dtype));
  write_dataset(path, dtype, documents);
  auto dataset = open_token_dataset(path);
  EXPECT_EQ(dataset->path(), path);
  expect_dataset(*dataset, dtype, documents);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, TokenDatasetRoundTrip,
                         ::testing::Combine(::testing::ValuesIn(kAllDtypes), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_hdf5" : "_mmap");
                         });

TEST(TokenDtype, SizesNamesAndMegatronsOptimalDtype) {
  EXPECT_EQ(dtype_size(TokenDtype::kUInt8), 1u);
  EXPECT_EQ(dtype_size(TokenDtype::kUInt16), 2u);
  EXPECT_EQ(dtype_size(TokenDtype::kInt32), 4u);
  EXPECT_EQ(dtype_size(TokenDtype::kFloat64), 8u);
  EXPECT_STREQ(dtype_name(TokenDtype::kFloat32), "float32");
  EXPECT_EQ(dtype_for_vocab_size(50257), TokenDtype::kUInt16);
  EXPECT_EQ(dtype_for_vocab_size(65499), TokenDtype::kUInt16);
  EXPECT_EQ(dtype_for_vocab_size(65500), TokenDtype::kInt32);
  EXPECT_EQ(dtype_for_vocab_size(128256), TokenDtype::kInt32);
  EXPECT_THROW(dtype_size(static_cast<TokenDtype>(9)), std::invalid_argument);
  EXPECT_TRUE(is_hdf5_path("a/b.h5") && is_hdf5_path("x.hdf5") && !is_hdf5_path("x_text_document"));
}

// The small dataset whose bytes the layout and corruption tests know:
// sequences [1 2 3] [4 5] | [65535] | [] ; document_indices [0 2 3 4].
const std::vector<Document> kSmall = {{{1, 2, 3}, {4, 5}}, {{65535}}, {{}}};

template <typename T>
T field(const std::string& bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

TEST(MmapIndexedDataset, IndexBytesFollowMegatronsLayout) {
  TempDir dir;
  write_dataset(dir / "small", TokenDtype::kUInt16, kSmall);
  const std::string idx = read_bytes(dir / "small.idx");
  ASSERT_EQ(idx.size(), 34u + 4 * 4 + 8 * 4 + 8 * 4);
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  EXPECT_EQ(field<uint64_t>(idx, 9), 1u);   // version
  EXPECT_EQ(field<uint8_t>(idx, 17), 8u);   // dtype code: uint16
  EXPECT_EQ(field<uint64_t>(idx, 18), 4u);  // sequence count
  EXPECT_EQ(field<uint64_t>(idx, 26), 4u);  // document count = len(document_indices)
  const int32_t lengths[] = {3, 2, 1, 0};
  const int64_t pointers[] = {0, 6, 10, 12};  // bytes
  const int64_t documents[] = {0, 2, 3, 4};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(field<int32_t>(idx, 34 + 4 * i), lengths[i]) << "sequence_lengths[" << i << "]";
    EXPECT_EQ(field<int64_t>(idx, 50 + 8 * i), pointers[i]) << "sequence_pointers[" << i << "]";
    EXPECT_EQ(field<int64_t>(idx, 82 + 8 * i), documents[i]) << "document_indices[" << i << "]";
  }
  const std::string bin = read_bytes(dir / "small.bin");
  const uint16_t tokens[] = {1, 2, 3, 4, 5, 65535};
  EXPECT_EQ(bin, std::string(reinterpret_cast<const char*>(tokens), sizeof tokens));
  EXPECT_FALSE(std::filesystem::exists(dir / "small.bin.tmp") || std::filesystem::exists(dir / "small.idx.tmp"));
}

TEST(TokenDataset, Hdf5AndMmapReadIdentically) {
  TempDir dir;
  const auto documents = random_documents(TokenDtype::kUInt16, 200, 7);
  write_dataset(dir / "data", TokenDtype::kUInt16, documents);
  write_dataset(dir / "data.hdf5", TokenDtype::kUInt16, documents);
  auto mmap = open_token_dataset(dir / "data");
  auto hdf5 = open_token_dataset(dir / "data.hdf5");
  ASSERT_EQ(mmap->num_sequences(), hdf5->num_sequences());
  EXPECT_EQ(mmap->document_indices(), hdf5->document_indices());
  EXPECT_EQ(mmap->num_tokens(), hdf5->num_tokens());
  EXPECT_EQ(mmap->dtype(), hdf5->dtype());
  for (int64_t i = 0; i < mmap->num_sequences(); ++i) {
    const int64_t length = mmap->sequence_length(i);
    ASSERT_EQ(length, hdf5->sequence_length(i));
    for (int64_t offset = 0; offset <= length; offset += 7) {
      const int64_t count = std::min<int64_t>(5, length - offset);
      Sequence a(count), b(count);
      mmap->read(i, offset, count, a.data());
      hdf5->read(i, offset, count, b.data());
      ASSERT_EQ(a, b) << "sequence " << i << " offset " << offset;
    }
  }
}

TEST(TokenDataset, ConcurrentReadsAgree) {
  TempDir dir;
  const auto documents = random_documents(TokenDtype::kInt32, 100, 11);
  write_dataset(dir / "data.h5", TokenDtype::kInt32, documents);
  write_dataset(dir / "data", TokenDtype::kInt32, documents);
  for (const std::string path : {dir / "data.h5", dir / "data"}) {
    auto dataset = open_token_dataset(path);
    std::vector<Sequence> expected;
    for (int64_t i = 0; i < dataset->num_sequences(); ++i) expected.push_back(read_all(*dataset, i));
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 20; ++round) {
          for (int64_t i = t; i < dataset->num_sequences(); i += 2) {
            if (read_all(*dataset, i) != expected[i]) ++mismatches[t];
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(mismatches, std::vector<int>(4, 0)) << path;
  }
}

// A .bin cut short while a dataset reads it (issue 31): the SIGBUS of the vanished page names the
// file instead of killing the process silently.
TEST(TokenDatasetDeathTest, ABinTruncatedUnderTheReaderIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // re-runs the test in the child: another TempDir
  TempDir dir;
  const std::string path = dir / "shrinking";
  write_dataset(path, TokenDtype::kUInt16, kSmall);
  auto dataset = open_token_dataset(path);
  std::filesystem::resize_file(path + ".bin", 0);
  int64_t out[3];
  EXPECT_EXIT(dataset->read(0, 0, 3, out), ::testing::ExitedWithCode(1),
              "shrinking.bin: reading byte 0 of it failed \\(SIGBUS\\) while reading sequence 0: the file is shorter than when it was opened");
  // What the reader was on, outermost first: a GPT dataset names its sample around the sequence.
  EXPECT_EXIT(
      {
        const serialization::MappedReadScope sample("sample", 7);
        dataset->read(0, 0, 3, out);
      },
      ::testing::ExitedWithCode(1), "shrinking.bin: reading byte 0 of it failed \\(SIGBUS\\) while reading sample 7, sequence 0: ");
}

TEST(TokenDataset, ReadOutsideASequenceThrowsNamingTheFile) {
  TempDir dir;
  for (const std::string path : {dir / "small", dir / "small.h5"}) {
    write_dataset(path, TokenDtype::kUInt16, kSmall);
    auto dataset = open_token_dataset(path);
    int64_t out[8];
    EXPECT_THROW(dataset->read(0, 2, 2, out), std::out_of_range);
    EXPECT_THROW(dataset->read(4, 0, 0, out), std::out_of_range);
    EXPECT_THROW(dataset->read(-1, 0, 0, out), std::out_of_range);
    EXPECT_THROW(dataset->sequence_length(4), std::out_of_range);
    EXPECT_NE(error_of([&] { dataset->read(1, 0, 3, out); }).find(path), std::string::npos);
    dataset->read(3, 0, 0, out);  // the empty sequence
  }
}

TEST(TokenDataset, NaNFloatTokenIsNamedWithItsFileAndSequence) {
  TempDir dir;
  write_dataset(dir / "floats", TokenDtype::kFloat32, {{{1, 2}}, {{3, 4, 5}}});
  std::string bin = read_bytes(dir / "floats.bin");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bin.data() + 3 * sizeof(float), &nan, sizeof(float));  // sequence 1, token 1
  write_bytes(dir / "floats.bin", bin);
  auto dataset = open_token_dataset(dir / "floats");
  int64_t out[3];
  dataset->read(0, 0, 2, out);
  const std::string message = error_of<std::out_of_range>([&] { dataset->read(1, 0, 3, out); });
  EXPECT_NE(message.find(dir / "floats.bin"), std::string::npos) << message;
  EXPECT_NE(message.find("sequence 1"), std::string::npos) << message;
  EXPECT_NE(message.find("nan"), std::string::npos) << message;
}

TEST(TokenDatasetWriter, NothingVisibleBeforeFinalizeAndNothingLeftWhenAbandoned) {
  TempDir dir;
  for (const std::string path : {dir / "data", dir / "data.h5"}) {
    {
      auto writer = create_token_dataset(path, TokenDtype::kUInt16);
      const int64_t tokens[] = {1, 2, 3};
      writer->add_sequence(tokens, 3);
      writer->end_document();
      EXPECT_THROW(open_token_dataset(path), std::runtime_error);
    }
    EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << path;
  }
}

TEST(TokenDatasetWriter, RefusesTokensTheDtypeCannotHold) {
  TempDir dir;
  for (const std::string path : {dir / "data", dir / "data.h5"}) {
    auto writer = create_token_dataset(path, TokenDtype::kUInt16);
    const int64_t too_big[] = {65536};
    const int64_t negative[] = {-1};
    const std::string message = error_of([&] { writer->add_sequence(too_big, 1); });
    EXPECT_NE(message.find("65536"), std::string::npos) << message;
    EXPECT_NE(message.find("uint16"), std::string::npos) << message;
    EXPECT_THROW(writer->add_sequence(negative, 1), std::out_of_range);
  }
  auto writer = create_token_dataset(dir / "open", TokenDtype::kInt32);
  const int64_t tokens[] = {1};
  writer->add_sequence(tokens, 1);
  EXPECT_THROW(writer->finalize(), std::logic_error);  // the document was never ended
}

// --- Corruption: each case is refused with a message naming the file at fault. ------------

class CorruptMmapDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    write_dataset(dir_ / "small", TokenDtype::kUInt16, kSmall);
    idx_ = read_bytes(dir_ / "small.idx");
    bin_ = read_bytes(dir_ / "small.bin");
  }
  // Writes the (modified) files back and returns the open error; checks it names `file`.
  std::string open_error(const std::string& file) {
    write_bytes(dir_ / "small.idx", idx_);
    write_bytes(dir_ / "small.bin", bin_);
    std::string message;
    try {
      open_token_dataset(dir_ / "small");
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find(dir_ / file), std::string::npos) << "message: '" << message << "'";
    return message;
  }
  template <typename T>
  void put(size_t offset, T value) {
    std::memcpy(idx_.data() + offset, &value, sizeof(T));
  }

  TempDir dir_;
  std::string idx_, bin_;
};

TEST_F(CorruptMmapDataset, IntactOpens) { expect_dataset(*open_token_dataset(dir_ / "small"), TokenDtype::kUInt16, kSmall); }

TEST_F(CorruptMmapDataset, MissingFiles) {
  EXPECT_NE(error_of([&] { open_token_dataset(dir_ / "nothing"); }).find(dir_ / "nothing.idx"), std::string::npos);
  std::filesystem::remove(dir_ / "small.bin");
  EXPECT_NE(error_of([&] { open_token_dataset(dir_ / "small"); }).find(dir_ / "small.bin"), std::string::npos);
}

TEST_F(CorruptMmapDataset, BadMagic) {
  idx_[0] = 'X';
  EXPECT_NE(open_error("small.idx").find("bad magic"), std::string::npos);
}

TEST_F(CorruptMmapDataset, UnsupportedVersion) {
  put<uint64_t>(9, 2);
  EXPECT_NE(open_error("small.idx").find("version 2"), std::string::npos);
}

TEST_F(CorruptMmapDataset, UnknownDtypeCode) {
  put<uint8_t>(17, 9);
  EXPECT_NE(open_error("small.idx").find("dtype code 9"), std::string::npos);
  put<uint8_t>(17, 0);
  EXPECT_NE(open_error("small.idx").find("dtype code 0"), std::string::npos);
}

TEST_F(CorruptMmapDataset, TruncatedIndex) {
  idx_.pop_back();
  EXPECT_NE(open_error("small.idx").find("truncated"), std::string::npos);
  idx_.resize(20);
  EXPECT_NE(open_error("small.idx").find("truncated"), std::string::npos);
}

TEST_F(CorruptMmapDataset, CountsBeyondTheIndex) {
  put<uint64_t>(18, uint64_t{1} << 62);
  EXPECT_NE(open_error("small.idx").find("truncated"), std::string::npos);
}

TEST_F(CorruptMmapDataset, MultimodalSectionRefused) {
  idx_ += std::string(4, '\0');  // int8 sequence_modes[4]
  EXPECT_NE(open_error("small.idx").find("multimodal"), std::string::npos);
}

TEST_F(CorruptMmapDataset, TrailingBytes) {
  idx_ += "xyz";
  EXPECT_NE(open_error("small.idx").find("unexpected bytes"), std::string::npos);
}

TEST_F(CorruptMmapDataset, SequenceBeyondTheBin) {
  bin_.resize(10);  // sequence 2 ([65535], bytes 10-11) is cut off
  EXPECT_NE(open_error("small.bin").find("sequence 2"), std::string::npos);
}

TEST_F(CorruptMmapDataset, LengthOrPointerBeyondTheBin) {
  put<int32_t>(34, 1000);
  EXPECT_NE(open_error("small.bin").find("beyond"), std::string::npos);
  put<int32_t>(34, 3);
  put<int64_t>(50 + 8, 4096);  // sequence_pointers[1]
  EXPECT_NE(open_error("small.bin").find("sequence 1"), std::string::npos);
  put<int64_t>(50 + 8, -2);
  EXPECT_NE(open_error("small.bin").find("sequence 1"), std::string::npos);
}

TEST_F(CorruptMmapDataset, DocumentIndicesDecreasing) {
  put<int64_t>(82 + 8, 3);
  put<int64_t>(82 + 16, 2);
  EXPECT_NE(open_error("small.idx").find("decreases"), std::string::npos);
}

TEST_F(CorruptMmapDataset, DocumentIndicesNotEndingAtTheSequenceCount) {
  put<int64_t>(82 + 24, 3);
  EXPECT_NE(open_error("small.idx").find("expected the sequence count 4"), std::string::npos);
}

TEST_F(CorruptMmapDataset, DocumentIndicesNotStartingAtZero) {
  put<int64_t>(82, 1);
  EXPECT_NE(open_error("small.idx").find("document_indices[0]"), std::string::npos);
}

TEST_F(CorruptMmapDataset, RepeatedDocumentIndexIsAnEmptyDocument) {
  put<int64_t>(82 + 8, 3);  // [0 3 3 4]: document 1 holds no sequence, as Megatron may write
  write_bytes(dir_ / "small.idx", idx_);
  auto dataset = open_token_dataset(dir_ / "small");
  EXPECT_EQ(dataset->document_indices(), (std::vector<int64_t>{0, 3, 3, 4}));
}

// Writes an HDF5 file with the given datasets (any may be left out).
struct H5Spec {
  hid_t token_type = H5T_STD_U16LE;
  std::vector<int64_t> tokens{1, 2, 3, 4, 5, 65535};
  std::vector<int64_t> lengths{3, 2, 1, 0};
  std::vector<int64_t> document_indices{0, 2, 3, 4};
  bool with_tokens = true, with_lengths = true, with_documents = true;
};

void write_h5(const std::string& path, const H5Spec& spec) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  auto put = [&](const char* name, hid_t type, const std::vector<int64_t>& values) {
    const hsize_t n = values.size();
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t dataset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (n > 0) H5Dwrite(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(dataset);
    H5Sclose(space);
  };
  if (spec.with_tokens) put("tokens", spec.token_type, spec.tokens);
  if (spec.with_lengths) put("sequence_lengths", H5T_STD_I64LE, spec.lengths);
  if (spec.with_documents) put("document_indices", H5T_STD_I64LE, spec.document_indices);
  H5Fclose(file);
}

std::string h5_error(const TempDir& dir, const H5Spec& spec) {
  const std::string path = dir / "bad.h5";
  write_h5(path, spec);
  const std::string message = error_of([&] { open_token_dataset(path); });
  EXPECT_NE(message.find(path), std::string::npos) << "message: '" << message << "'";
  return message;
}

TEST(CorruptHdf5Dataset, EachDefectIsNamed) {
  TempDir dir;
  {  // A hand-written file in the documented layout (int64 lengths) opens and reads.
    write_h5(dir / "good.h5", H5Spec{});
    auto dataset = open_token_dataset(dir / "good.h5");
    expect_dataset(*dataset, TokenDtype::kUInt16, kSmall);
  }
  EXPECT_NE(error_of([&] { open_token_dataset(dir / "none.h5"); }).find(dir / "none.h5"), std::string::npos);
  write_bytes(dir / "text.h5", "not hdf5 at all");
  EXPECT_NE(error_of([&] { open_token_dataset(dir / "text.h5"); }).find(dir / "text.h5"), std::string::npos);
  const std::string whole = read_bytes(dir / "good.h5");  // cut short: the signature is there, the rest is not
  write_bytes(dir / "cut.h5", whole.substr(0, whole.size() / 2));
  const std::string cut = error_of([&] { open_token_dataset(dir / "cut.h5"); });
  EXPECT_NE(cut.find(dir / "cut.h5: an HDF5 file HDF5 cannot open (" + std::to_string(whole.size() / 2) + " bytes; truncated"),
            std::string::npos) << cut;

  H5Spec spec;
  spec.with_documents = false;
  EXPECT_NE(h5_error(dir, spec).find("/document_indices"), std::string::npos);
  spec = H5Spec{};
  spec.with_tokens = false;
  EXPECT_NE(h5_error(dir, spec).find("/tokens"), std::string::npos);
  spec = H5Spec{};
  spec.token_type = H5T_STD_U32LE;
  EXPECT_NE(h5_error(dir, spec).find("unknown dtype"), std::string::npos);
  spec = H5Spec{};
  spec.lengths = {3, 2, 2, 0};
  EXPECT_NE(h5_error(dir, spec).find("beyond the end of /tokens"), std::string::npos);
  spec = H5Spec{};
  spec.lengths = {3, 2, 0, 0};
  EXPECT_NE(h5_error(dir, spec).find("sum to 5"), std::string::npos);
  spec = H5Spec{};
  spec.document_indices = {0, 3, 2, 4};
  EXPECT_NE(h5_error(dir, spec).find("decreases"), std::string::npos);
  spec = H5Spec{};
  spec.document_indices = {0, 2, 3};
  EXPECT_NE(h5_error(dir, spec).find("expected the sequence count 4"), std::string::npos);
}

// --- An independent writer: Megatron's IndexedDatasetBuilder in Python + NumPy. -------------

bool python_with_numpy() {
  return std::system((megacpp::io_test::kDebianPython + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0;
}

TEST(MegatronReferenceWriter, DatasetsItWritesReadBackExactly) {
  ASSERT_TRUE(python_with_numpy()) << megacpp::io_test::kDebianPython << " with NumPy is needed (scripts/setup.sh installs python3-numpy)";
  TempDir dir;
  const std::string script = std::string(MEGACPP_SOURCE_DIR) + "/tests/reference/megatron_indexed_writer.py";
  for (TokenDtype dtype : {TokenDtype::kUInt16, TokenDtype::kInt32, TokenDtype::kUInt8, TokenDtype::kInt64,
                           TokenDtype::kFloat32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto documents = random_documents(dtype, 30, 99 + static_cast<int>(dtype));
    nlohmann::json spec = {{"dtype", dtype_name(dtype)}, {"documents", documents}};
    write_bytes(dir / "spec.json", spec.dump());
    const std::string reference = dir / (std::string("reference_") + dtype_name(dtype));
    const std::string command = megacpp::io_test::kDebianPython + " '" + script + "' '" + (dir / "spec.json") + "' '" + reference + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    expect_dataset(*open_token_dataset(reference), dtype, documents);
    // And megacpp's writer produces the very same bytes.
    const std::string ours = dir / (std::string("ours_") + dtype_name(dtype));
    write_dataset(ours, dtype, documents);
    EXPECT_EQ(read_bytes(ours + ".idx"), read_bytes(reference + ".idx"));
    EXPECT_EQ(read_bytes(ours + ".bin"), read_bytes(reference + ".bin"));
  }
}

}  // namespace
}  // namespace megacpp::io::data
