#include "io/data/dataset_builder.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "io/data/blended_dataset.h"
#include "io/data/gpt_dataset.h"
#include "io/data/indexed_dataset.h"

namespace megacpp::io::data {
namespace {

bool parse_double(const std::string& text, double* value) {
  try {
    size_t used = 0;
    *value = std::stod(text, &used);
    return used == text.size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

// Megatron's split arithmetic: rounded boundaries (half to even, as Python's round), the
// rounding error taken off every boundary after the first so the last one lands on the end.
std::array<int64_t, 4> split_boundaries(const std::array<double, 3>& split, int64_t count) {
  std::array<int64_t, 4> bounds{0, 0, 0, 0};
  for (int i = 0; i < 3; ++i) bounds[i + 1] = bounds[i] + static_cast<int64_t>(std::nearbyint(split[i] * static_cast<double>(count)));
  const int64_t excess = bounds[3] - count;
  for (int i = 1; i < 4; ++i) bounds[i] -= excess;
  return bounds;
}

DataBlend parse_data_blend(const std::vector<std::string>& words) {
  DataBlend blend;
  if (words.empty()) throw std::invalid_argument("--data-path: no dataset given");
  if (words.size() == 1) {
    blend.paths = words;
    blend.weights = {1.0};
    return blend;
  }
  if (words.size() % 2 != 0) {
    throw std::invalid_argument("--data-path: a blend is 'WEIGHT PREFIX' pairs, got " + std::to_string(words.size()) + " words");
  }
  for (size_t i = 0; i < words.size(); i += 2) {
    double weight = 0;
    if (!parse_double(words[i], &weight) || !(weight > 0) || !std::isfinite(weight)) {
      throw std::invalid_argument("--data-path: weight '" + words[i] + "' (before '" + words[i + 1] + "') is not a positive number");
    }
    blend.weights.push_back(weight);
    blend.paths.push_back(words[i + 1]);
  }
  return blend;
}

std::array<double, 3> parse_split(const std::string& text) {
  std::array<double, 3> parts{0, 0, 0};
  std::string normalized = text;
  // Megatron picks the numbers out of the text, so a value that a launch script quotes inside a
  // bash array ("--split '99,1,0'", which reaches the program with its quotes) works there.
  const bool quoted = text.size() >= 2 && (text.front() == '\'' || text.front() == '"') && text.back() == text.front();
  if (quoted) normalized = text.substr(1, text.size() - 2);
  for (char& c : normalized) {
    if (c == '/') c = ',';
  }
  std::stringstream stream(normalized);
  std::string item;
  int n = 0;
  double total = 0;
  while (std::getline(stream, item, ',')) {
    double value = 0;
    if (n == 3 || !parse_double(item, &value) || value < 0 || !std::isfinite(value)) {
      throw std::invalid_argument("--split: '" + text + "' must be up to three non-negative numbers, e.g. 969,30,1");
    }
    parts[n++] = value;
    total += value;
  }
  if (n == 0 || !(total > 0)) throw std::invalid_argument("--split: '" + text + "' has no positive part");
  for (double& p : parts) p /= total;
  return parts;
}

DatasetSplits build_gpt_datasets(const DataBlend& blend, const std::array<double, 3>& split,
                                 const std::array<int64_t, 3>& num_samples, int64_t seq_length, uint64_t seed,
                                 const SampleIndexCache& cache) {
  DatasetSplits result;
  std::array<std::vector<std::shared_ptr<const SampleSource>>, 3> parts;
  const bool blended = blend.paths.size() > 1;
  const double weight_total = [&] {
    double t = 0;
    for (double w : blend.weights) t += w;
    return t;
  }();
  for (size_t d = 0; d < blend.paths.size(); ++d) {
    std::shared_ptr<const TokenDataset> data = open_token_dataset(blend.paths[d]);
    const auto bounds = split_boundaries(split, data->num_sequences());
    std::ostringstream line;
    line << data->path() << ": " << data->num_sequences() << " sequences, " << data->num_tokens() << " tokens";
    for (int s = 0; s < 3; ++s) {
      line << (s == 0 ? " | " : ", ") << split_name(s) << " " << bounds[s + 1] - bounds[s];
      if (num_samples[s] == 0) continue;
      if (bounds[s + 1] == bounds[s]) {
        throw std::invalid_argument("--split: the " + std::string(split_name(s)) + " split of " + data->path() +
                                    " has no sequences, but " + std::to_string(num_samples[s]) + " samples are needed");
      }
      // Megatron asks each blended dataset for its share plus 0.5%, so rounding never runs it dry.
      const int64_t wanted =
          blended ? static_cast<int64_t>(std::ceil(std::ceil(static_cast<double>(num_samples[s]) * blend.weights[d] / weight_total) * 1.005))
                  : num_samples[s];
      auto dataset = std::make_shared<GPTDataset>(data, bounds[s], bounds[s + 1], wanted, seq_length, seed, cache);
      if (dataset->indices_from_cache()) line << " (indices from " << cache.dir << ")";
      parts[s].push_back(std::move(dataset));
    }
    line << " sequences";
    result.summary.push_back(line.str());
  }
  for (int s = 0; s < 3; ++s) {
    if (num_samples[s] == 0) continue;
    result.splits[s] = blended ? std::make_shared<BlendedDataset>(parts[s], blend.weights, num_samples[s]) : parts[s].front();
  }
  return result;
}

}  // namespace megacpp::io::data
