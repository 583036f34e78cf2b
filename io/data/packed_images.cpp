#include "io/data/packed_images.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace megacpp::io::data {
namespace {

const char kMagic[8] = {'M', 'C', 'P', 'I', 'X', 'E', 'L', '1'};
constexpr size_t kHeaderBytes = 8 + 4 * 8;

uint64_t read_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void write_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

PackedImages::PackedImages(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::invalid_argument("cannot open the packed images " + path);
  struct stat st {};
  ::fstat(fd, &st);
  mapped_bytes_ = static_cast<size_t>(st.st_size);
  if (mapped_bytes_ >= kHeaderBytes) mapping_ = ::mmap(nullptr, mapped_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping_ == MAP_FAILED) mapping_ = nullptr;
  if (mapping_) guard_ = std::make_unique<serialization::MappedFileGuard>(mapping_, mapped_bytes_, path_);
  try {
    read_header();
  } catch (...) {
    if (mapping_) ::munmap(mapping_, mapped_bytes_);
    throw;
  }
}

void PackedImages::read_header() {
  const auto* bytes = static_cast<const uint8_t*>(mapping_);
  if (!bytes || std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0) {
    throw std::invalid_argument(path_ + " is not a packed-images file (made by megacpp-preprocess --pack-images)");
  }
  uint64_t shape[4];
  for (int i = 0; i < 4; ++i) shape[i] = read_u64(bytes + 8 + 8 * i);
  uint64_t image_bytes = 0, all_bytes = 0;
  const bool overflow = __builtin_mul_overflow(shape[1], shape[2], &image_bytes) ||
                        __builtin_mul_overflow(image_bytes, shape[3], &image_bytes) ||
                        __builtin_mul_overflow(image_bytes, shape[0], &all_bytes) || all_bytes > mapped_bytes_;
  if (overflow || kHeaderBytes + all_bytes != mapped_bytes_ || shape[2] != shape[3]) {
    throw std::invalid_argument(path_ + ": the header says " + std::to_string(shape[0]) + " images of " + std::to_string(shape[2]) + "x" +
                                std::to_string(shape[3]) + "x" + std::to_string(shape[1]) + ", not what the file's " +
                                std::to_string(mapped_bytes_) + " bytes hold (cut short?)");
  }
  count_ = static_cast<int64_t>(shape[0]);
  channels_ = static_cast<int64_t>(shape[1]);
  height_ = static_cast<int64_t>(shape[2]);
  width_ = static_cast<int64_t>(shape[3]);
  data_ = bytes + kHeaderBytes;
}

PackedImages::~PackedImages() {
  guard_.reset();  // before the range can be mapped again by someone else
  if (mapping_) ::munmap(mapping_, mapped_bytes_);
}

const uint8_t* PackedImages::image(int64_t index) const {
  if (index < 0 || index >= count_) throw std::out_of_range(path_ + ": image " + std::to_string(index) + " of " + std::to_string(count_));
  return data_ + static_cast<size_t>(index * channels_ * height_ * width_);
}

namespace {

std::vector<uint8_t> header_bytes(int64_t count, int64_t channels, int64_t size) {
  std::vector<uint8_t> header(kHeaderBytes);
  std::memcpy(header.data(), kMagic, sizeof(kMagic));
  write_u64(header.data() + 8, static_cast<uint64_t>(count));
  write_u64(header.data() + 16, static_cast<uint64_t>(channels));
  write_u64(header.data() + 24, static_cast<uint64_t>(size));
  write_u64(header.data() + 32, static_cast<uint64_t>(size));
  return header;
}

}  // namespace

PackedImagesWriter::PackedImagesWriter(const std::string& path, int64_t size, int64_t channels)
    : path_(path), size_(size), channels_(channels), out_(path + ".tmp", std::ios::binary | std::ios::trunc) {
  if (!out_) throw std::runtime_error("cannot write " + path + ".tmp");
  const auto header = header_bytes(0, channels_, size_);
  out_.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
}

void PackedImagesWriter::add(const std::vector<uint8_t>& prepared) {
  if (static_cast<int64_t>(prepared.size()) != size_ * size_ * channels_) {
    throw std::invalid_argument("PackedImagesWriter: an image of " + std::to_string(prepared.size()) + " bytes for " +
                                std::to_string(size_) + "x" + std::to_string(size_) + "x" + std::to_string(channels_));
  }
  out_.write(reinterpret_cast<const char*>(prepared.data()), static_cast<std::streamsize>(prepared.size()));
  ++count_;
}

void PackedImagesWriter::finish() {
  const auto header = header_bytes(count_, channels_, size_);
  out_.seekp(0);
  out_.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  out_.close();
  if (!out_) throw std::runtime_error("cannot write " + path_ + ".tmp");
  if (std::rename((path_ + ".tmp").c_str(), path_.c_str()) != 0) throw std::runtime_error("cannot rename " + path_ + ".tmp to " + path_);
}

}  // namespace megacpp::io::data
