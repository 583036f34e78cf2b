// Images for a vision tower, read as transformers' CLIPImageProcessor prepares them: decoded
// (PNG, JPEG, BMP, GIF, ... through Debian's stb_image), converted to the tower's channels (grey
// repeated as RGB, alpha dropped, RGB to grey as PIL's convert("L")), the shorter side resized to the tower's size (bicubic,
// Catmull-Rom as PIL's, on 8-bit pixels) and the center cropped square, rescaled by 1/255 and
// normalized with a per-channel mean and std.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace megacpp::io::data {

struct ImageProcessing {
  int64_t size = 224;    // the tower's square input, in pixels
  int64_t channels = 3;  // 1 or 3
  // CLIP's (OPENAI_CLIP_MEAN / OPENAI_CLIP_STD); --image-mean / --image-std.
  std::array<double, 3> mean = {0.48145466, 0.4578275, 0.40821073};
  std::array<double, 3> std = {0.26862954, 0.26130258, 0.27577711};
};

// Throws std::invalid_argument naming --num-channels, --image-mean or --image-std for channels
// other than 1 or 3, a std that is not positive, or per-channel values a grey model cannot use.
void check_image_processing(const ImageProcessing& processing);

// The pixels of the image file `path`, [channels, size, size] in C order. Throws
// std::runtime_error starting with `where` (the data file and line that name the image) for a
// file that cannot be read or decoded.
std::vector<float> load_image(const std::string& path, const ImageProcessing& processing, const std::string& where);

// The steps of load_image: the file decoded, converted to the channels, resized and cropped to
// 8-bit pixels [size, size, channels] (what megacpp-preprocess --pack-images stores)...
std::vector<uint8_t> prepare_image(const std::string& path, int64_t size, int64_t channels, const std::string& where);
// ... the same for an 8-bit image in memory, interleaved [height, width, channels_in] ...
std::vector<uint8_t> prepare_image(const uint8_t* pixels, int width, int height, int channels_in, int64_t size, int64_t channels);
// ... and those pixels rescaled by 1/255 and normalized, [channels, size, size].
std::vector<float> normalize_image(const uint8_t* prepared, const ImageProcessing& processing);

}  // namespace megacpp::io::data
