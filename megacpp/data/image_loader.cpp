#include "megacpp/data/image_loader.h"

#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <vector>

#include <stb_image.h>
#include <stb_image_resize.h>

namespace megacpp::data {
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
  if (in.width != size || in.height != size) {
    const bool wide = in.width >= in.height;
    const int short_side = wide ? in.height : in.width, long_side = wide ? in.width : in.height;
    const int scaled_long = static_cast<int>(static_cast<int64_t>(size) * long_side / short_side);
    out.width = wide ? scaled_long : size;
    out.height = wide ? size : scaled_long;
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

std::vector<float> process_image(const uint8_t* pixels, int width, int height, int channels, const ImageProcessing& p) {
  if (p.channels != 1 && p.channels != 3) throw std::invalid_argument("images of " + std::to_string(p.channels) + " channels: only 1 or 3");
  Pixels in;
  in.width = width, in.height = height, in.channels = static_cast<int>(p.channels);
  in.data.resize(static_cast<size_t>(width) * height * p.channels);
  // To the tower's channels: grey repeated (convert_rgb), alpha dropped, RGB averaged to grey.
  for (size_t i = 0; i < static_cast<size_t>(width) * height; ++i) {
    const uint8_t* px = pixels + i * channels;
    const bool grey = channels < 3;
    for (int c = 0; c < in.channels; ++c) {
      in.data[i * in.channels + c] = grey ? px[0] : in.channels == 3 ? px[c] : static_cast<uint8_t>((px[0] + px[1] + px[2] + 1) / 3);
    }
  }
  const Pixels square = resize_and_crop(in, static_cast<int>(p.size));
  // [size, size, channels] bytes -> [channels, size, size], rescaled and normalized.
  std::vector<float> out(square.data.size());
  const size_t plane = static_cast<size_t>(p.size) * p.size;
  for (size_t i = 0; i < plane; ++i) {
    for (int64_t c = 0; c < p.channels; ++c) {
      const double value = square.data[i * p.channels + c] / 255.0;
      out[c * plane + i] = static_cast<float>((value - p.mean[c]) / p.std[c]);
    }
  }
  return out;
}

std::vector<float> load_image(const std::string& path, const ImageProcessing& processing, const std::string& where) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(where + ": cannot read the image " + path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  int width = 0, height = 0, channels = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height, &channels, 0), stbi_image_free);
  if (!pixels) throw std::runtime_error(where + ": cannot decode the image " + path + " (" + stbi_failure_reason() + ")");
  return process_image(pixels.get(), width, height, channels, processing);
}

}  // namespace megacpp::data
