#include "io/data/image_loader.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <vector>

#include <stb_image.h>
#include <stb_image_resize.h>

namespace megacpp::io::data {
namespace {

// Interleaved 8-bit pixels and their shape.
struct Pixels {
  std::vector<uint8_t> data;
  int width = 0, height = 0, channels = 0;
};

// CLIPImageProcessor's resize: the shorter side to `size`, the longer in proportion
// (get_resize_output_image_size truncates it), then the center `size` x `size`.
Pixels resize_and_crop(const Pixels& in, int size) {
  Pixels out = in;
  const bool wide = in.width >= in.height;
  const int short_side = wide ? in.height : in.width, long_side = wide ? in.width : in.height;
  const int scaled_long = static_cast<int>(static_cast<int64_t>(size) * long_side / short_side);
  out.width = wide ? scaled_long : size;
  out.height = wide ? size : scaled_long;
  if (out.width != in.width || out.height != in.height) {
    out.data.resize(static_cast<size_t>(out.width) * out.height * in.channels);
    if (!stbir_resize_uint8_generic(in.data.data(), in.width, in.height, 0, out.data.data(), out.width, out.height, 0, in.channels,
                                    STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP, STBIR_FILTER_CATMULLROM, STBIR_COLORSPACE_LINEAR,
                                    nullptr)) {
      throw std::runtime_error("resizing failed");
    }
  }
  if (out.width == size && out.height == size) return out;
  Pixels crop;
  crop.width = crop.height = size;
  crop.channels = out.channels;
  const int left = (out.width - size) / 2, top = (out.height - size) / 2;
  for (int y = 0; y < size; ++y) {
    const uint8_t* row = out.data.data() + (static_cast<size_t>(top + y) * out.width + left) * out.channels;
    crop.data.insert(crop.data.end(), row, row + static_cast<size_t>(size) * out.channels);
  }
  return crop;
}

}  // namespace

void check_image_processing(const ImageProcessing& p) {
  if (p.channels != 1 && p.channels != 3) throw std::invalid_argument("--num-channels must be 1 or 3, got " + std::to_string(p.channels));
  for (const auto& [flag, values] : {std::make_pair("--image-mean", p.mean), std::make_pair("--image-std", p.std)}) {
    if (p.channels == 1 && (values[1] != values[0] || values[2] != values[0])) {
      throw std::invalid_argument(std::string(flag) + " gives 3 different values for images of 1 channel: give one");
    }
  }
  for (double s : p.std) {
    if (!(s > 0)) throw std::invalid_argument("--image-std: each channel's std must be positive");
  }
}

std::vector<uint8_t> prepare_image(const uint8_t* pixels, int width, int height, int channels_in, int64_t size, int64_t channels) {
  if (channels != 1 && channels != 3) throw std::invalid_argument("images of " + std::to_string(channels) + " channels: only 1 or 3");
  Pixels in;
  in.width = width, in.height = height, in.channels = static_cast<int>(channels);
  in.data.resize(static_cast<size_t>(width) * height * channels);
  // To the tower's channels: grey repeated (convert_rgb), alpha dropped, RGB to grey as PIL's
  // convert("L") does (ITU-R 601-2 luma, in 16-bit fixed point).
  for (size_t i = 0; i < static_cast<size_t>(width) * height; ++i) {
    const uint8_t* px = pixels + i * channels_in;
    const bool grey = channels_in < 3;
    for (int c = 0; c < in.channels; ++c) {
      in.data[i * in.channels + c] =
          grey ? px[0] : in.channels == 3 ? px[c] : static_cast<uint8_t>((px[0] * 19595 + px[1] * 38470 + px[2] * 7471 + 0x8000) >> 16);
    }
  }
  return resize_and_crop(in, static_cast<int>(size)).data;
}

std::vector<float> normalize_image(const uint8_t* prepared, const ImageProcessing& p) {
  // [size, size, channels] bytes -> [channels, size, size], rescaled and normalized.
  const size_t plane = static_cast<size_t>(p.size) * p.size;
  std::vector<float> out(plane * p.channels);
  for (size_t i = 0; i < plane; ++i) {
    for (int64_t c = 0; c < p.channels; ++c) {
      const double value = prepared[i * p.channels + c] / 255.0;
      out[c * plane + i] = static_cast<float>((value - p.mean[c]) / p.std[c]);
    }
  }
  return out;
}

std::vector<uint8_t> prepare_image(const std::string& path, int64_t size, int64_t channels, const std::string& where) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(where + ": cannot read the image " + path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  int width = 0, height = 0, channels_in = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height, &channels_in, 0), stbi_image_free);
  if (!pixels) throw std::runtime_error(where + ": cannot decode the image " + path + " (" + stbi_failure_reason() + ")");
  return prepare_image(pixels.get(), width, height, channels_in, size, channels);
}

std::vector<float> load_image(const std::string& path, const ImageProcessing& processing, const std::string& where) {
  return normalize_image(prepare_image(path, processing.size, processing.channels, where).data(), processing);
}

}  // namespace megacpp::io::data
