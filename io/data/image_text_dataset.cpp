#include "io/data/image_text_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "io/data/random.h"
#include "io/serialization/mapped_file_guard.h"

namespace megacpp::io::data {
namespace {

namespace fs = std::filesystem;

// The string field `key` of a line's object; `required` ones must be there.
std::string text_field(const nlohmann::json& line, const std::string& key, bool required, const std::string& where) {
  const auto it = line.find(key);
  if (it == line.end() || it->is_null()) {
    if (required) throw std::invalid_argument(where + ": no \"" + key + "\"");
    return "";
  }
  if (!it->is_string()) throw std::invalid_argument(where + ": \"" + key + "\" must be a string, got " + it->dump());
  return it->get<std::string>();
}

// Packed-image files by path, each opened once.
using PackCache = std::map<std::string, std::shared_ptr<const PackedImages>>;

// {"pixels": "FILE.pixels", "index": N}: image N of images packed at the format's shape.
void read_packed_image(const nlohmann::json& image, const fs::path& folder, const ImageTextFormat& format, PackCache& packs,
                       ImageTextRecord& r) {
  const std::string file = text_field(image, "pixels", true, r.where + ": \"image\"");
  const auto index = image.find("index");
  if (index == image.end() || !index->is_number_integer()) throw std::invalid_argument(r.where + ": \"image\": no integer \"index\"");
  const std::string path = (folder / file).lexically_normal().string();
  auto& pack = packs[path];
  if (!pack) {
    try {
      pack = std::make_shared<const PackedImages>(path);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(r.where + ": " + e.what());
    }
  }
  const auto& p = format.processing;
  if (pack->channels() != p.channels || pack->size() != p.size) {
    throw std::invalid_argument(r.where + ": " + path + " holds " + std::to_string(pack->size()) + "x" + std::to_string(pack->size()) + "x" +
                                std::to_string(pack->channels()) + " images; the model takes " + std::to_string(p.size) + "x" +
                                std::to_string(p.size) + "x" + std::to_string(p.channels) + " (pack them again with --img-h " +
                                std::to_string(p.size) + " --num-channels " + std::to_string(p.channels) + ")");
  }
  r.packed = pack;
  r.packed_index = index->get<int64_t>();
  if (r.packed_index < 0 || r.packed_index >= pack->count()) {
    throw std::invalid_argument(r.where + ": image index " + std::to_string(r.packed_index) + " is not in " + path + " (" +
                                std::to_string(pack->count()) + " images)");
  }
}

ImageTextRecord parse_line(const std::string& line, const fs::path& folder, const Tokenizer& tokenizer, const ImageTextFormat& format,
                           int64_t sample_length, const std::string& where, PackCache& packs) {
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(where + ": not JSON (" + e.what() + ")");
  }
  if (!object.is_object()) throw std::invalid_argument(where + ": expected a JSON object {\"image\": ..., \"text\": ...}");
  ImageTextRecord r;
  r.where = where;
  const auto image = object.find("image");
  if (image != object.end() && image->is_object()) {
    read_packed_image(*image, folder, format, packs, r);
  } else {
    r.image = (folder / text_field(object, "image", true, where)).lexically_normal().string();
    if (!fs::is_regular_file(r.image)) throw std::invalid_argument(where + ": the image " + r.image + " does not exist");
  }
  const std::string text = text_field(object, "text", true, where);
  if (text.empty()) throw std::invalid_argument(where + ": \"text\" is empty: nothing to learn");
  r.prompt = tokenizer.tokenize(text_field(object, "prompt", false, where));
  r.text = tokenizer.tokenize(text);
  r.text.push_back(tokenizer.eod());
  for (const auto* tokens : {&r.prompt, &r.text}) {
    if (std::find(tokens->begin(), tokens->end(), format.image_token_id) != tokens->end()) {
      throw std::invalid_argument(where + ": the " + (tokens == &r.prompt ? "prompt" : "text") + " holds token id " +
                                  std::to_string(format.image_token_id) + ", the image token (--image-token-id)");
    }
  }
  const int64_t unscored = format.tokens_per_image + static_cast<int64_t>(r.prompt.size());
  if (unscored >= sample_length - 1) {
    throw std::invalid_argument(where + ": the image's " + std::to_string(format.tokens_per_image) + " tokens and the prompt's " +
                                std::to_string(r.prompt.size()) + " leave no text within --seq-length " +
                                std::to_string(sample_length - 1));
  }
  return r;
}

}  // namespace

bool is_image_text_path(const std::vector<std::string>& data_path) {
  const std::string suffix = ".jsonl";
  return data_path.size() == 1 && data_path[0].size() > suffix.size() &&
         data_path[0].compare(data_path[0].size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<float> record_pixels(const ImageTextRecord& record, const ImageProcessing& processing) {
  if (record.packed) {
    const serialization::MappedReadScope reading("image", record.packed_index);
    return normalize_image(record.packed->image(record.packed_index), processing);
  }
  return load_image(record.image, processing, record.where);
}

std::vector<ImageTextRecord> read_image_text_file(const std::string& path, const Tokenizer& tokenizer, const ImageTextFormat& format,
                                                  int64_t sample_length) {
  check_image_processing(format.processing);
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read the image-text file " + path);
  const fs::path folder = fs::path(path).parent_path();
  std::vector<ImageTextRecord> records;
  PackCache packs;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    records.push_back(parse_line(line, folder, tokenizer, format, sample_length, path + ":" + std::to_string(number), packs));
  }
  if (records.empty()) throw std::invalid_argument(path + ": no samples");
  return records;
}

ImageTextDataset::ImageTextDataset(std::shared_ptr<const std::vector<ImageTextRecord>> records, int64_t first, int64_t count,
                                   ImageTextFormat format, int64_t sample_length, int64_t pad_id, uint64_t seed, int64_t size)
    : records_(std::move(records)), first_(first), count_(count), format_(std::move(format)), sample_length_(sample_length),
      pad_id_(pad_id), size_(size) {
  if (count_ <= 0 || first_ < 0 || first_ + count_ > static_cast<int64_t>(records_->size())) {
    throw std::invalid_argument("ImageTextDataset: records [" + std::to_string(first_) + ", " + std::to_string(first_ + count_) +
                                ") of " + std::to_string(records_->size()));
  }
  order_ = shuffled_passes(first_, count_, size_, seed);
}

const ImageTextRecord& ImageTextDataset::record(int64_t index) const {
  if (index < 0 || index >= size_) throw std::out_of_range("image-text sample " + std::to_string(index) + " of " + std::to_string(size_));
  return (*records_)[static_cast<size_t>(order_[static_cast<size_t>(index)])];
}

void ImageTextDataset::sample(int64_t index, int64_t* out) const {
  const ImageTextRecord& r = record(index);
  int64_t* const end = out + sample_length_;
  int64_t* at = std::fill_n(out, std::min(format_.tokens_per_image, sample_length_), format_.image_token_id);
  for (const auto* tokens : {&r.prompt, &r.text}) {
    const auto n = std::min<int64_t>(static_cast<int64_t>(tokens->size()), end - at);
    at = std::copy_n(tokens->begin(), n, at);
  }
  std::fill(at, end, pad_id_);
}

void ImageTextDataset::sample_extras(int64_t index, uint8_t* loss_mask, std::vector<float>& pixels) const {
  const ImageTextRecord& r = record(index);
  // Label i is token i + 1: scored from the text's first token to its end-of-document token.
  const int64_t text_begin = format_.tokens_per_image + static_cast<int64_t>(r.prompt.size());
  const int64_t text_end = text_begin + static_cast<int64_t>(r.text.size());
  for (int64_t i = 0; i + 1 < sample_length_; ++i) loss_mask[i] = i + 1 >= text_begin && i + 1 < text_end;
  const std::vector<float> image = record_pixels(r, format_.processing);
  pixels.insert(pixels.end(), image.begin(), image.end());
}

}  // namespace megacpp::io::data
