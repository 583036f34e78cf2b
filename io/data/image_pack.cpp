#include "io/data/image_pack.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/data/image_loader.h"
#include "io/data/packed_images.h"
#include "io/serialization/atomic_file.h"

namespace megacpp::io::data {
namespace {

namespace fs = std::filesystem;

struct PackLine {
  nlohmann::json object;
  std::string image, where;
};

std::vector<PackLine> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--input " + path + ": cannot be read");
  const fs::path folder = fs::path(path).parent_path();
  std::vector<PackLine> lines;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    PackLine line;
    line.where = path + ":" + std::to_string(number);
    try {
      line.object = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      throw std::invalid_argument(line.where + ": not JSON (" + e.what() + ")");
    }
    const auto image = line.object.is_object() ? line.object.find("image") : line.object.end();
    if (!line.object.is_object() || image == line.object.end() || !image->is_string()) {
      throw std::invalid_argument(line.where + ": expected a JSON object with \"image\", the path of an image file");
    }
    line.image = (folder / image->get<std::string>()).lexically_normal().string();
    if (!fs::is_regular_file(line.image)) throw std::invalid_argument(line.where + ": the image " + line.image + " does not exist");
    lines.push_back(std::move(line));
  }
  if (lines.empty()) throw std::invalid_argument("--input " + path + ": no lines");
  return lines;
}

// Lines [begin, end) prepared on `workers` threads, in order.
std::vector<std::vector<uint8_t>> prepare_chunk(const std::vector<PackLine>& lines, size_t begin, size_t end, const ImagePackOptions& o) {
  std::vector<std::vector<uint8_t>> images(end - begin);
  auto work = [&](size_t first) {
    for (size_t i = first; i < end; i += static_cast<size_t>(o.workers)) {
      images[i - begin] = prepare_image(lines[i].image, o.size, o.channels, lines[i].where);
    }
  };
  std::vector<std::future<void>> others;
  for (int t = 1; t < o.workers; ++t) others.push_back(std::async(std::launch::async, work, begin + static_cast<size_t>(t)));
  work(begin);
  for (auto& other : others) other.get();
  return images;
}

}  // namespace

ImagePackResult pack_images(const ImagePackOptions& o, std::ostream* progress) {
  const auto started = std::chrono::steady_clock::now();
  const std::vector<PackLine> lines = read_lines(o.input);
  ImagePackResult result;
  result.pixels = o.output_prefix + ".pixels";
  result.jsonl = o.output_prefix + ".jsonl";
  if (!fs::path(result.pixels).parent_path().empty()) fs::create_directories(fs::path(result.pixels).parent_path());
  PackedImagesWriter writer(result.pixels, o.size, o.channels);
  const size_t chunk = 1024;
  for (size_t begin = 0; begin < lines.size(); begin += chunk) {
    const size_t end = std::min(lines.size(), begin + chunk);
    for (const auto& image : prepare_chunk(lines, begin, end, o)) writer.add(image);
    if (progress && o.log_interval > 0 && (end / static_cast<size_t>(o.log_interval)) > (begin / static_cast<size_t>(o.log_interval))) {
      *progress << "packed " << end << " of " << lines.size() << " images\n";
    }
  }
  writer.finish();
  const std::string name = fs::path(result.pixels).filename().string();
  std::string jsonl;
  for (size_t i = 0; i < lines.size(); ++i) {
    nlohmann::json object = lines[i].object;
    object["image"] = {{"pixels", name}, {"index", static_cast<int64_t>(i)}};
    jsonl += object.dump() + "\n";
  }
  serialization::write_file_atomically(result.jsonl, jsonl);
  result.images = static_cast<int64_t>(lines.size());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace megacpp::io::data
