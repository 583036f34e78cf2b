#include "io/data/sample_packing.h"

#include <map>
#include <stdexcept>
#include <string>

namespace megacpp::io::data {

std::vector<std::vector<int64_t>> pack_samples(const std::vector<int64_t>& lengths, int64_t capacity) {
  // length -> the samples of that length not packed yet, in input order
  std::map<int64_t, std::vector<int64_t>> left;
  for (int64_t i = static_cast<int64_t>(lengths.size()) - 1; i >= 0; --i) {
    const int64_t length = lengths[static_cast<size_t>(i)];
    if (length > capacity) {
      throw std::invalid_argument("sample " + std::to_string(i) + " has " + std::to_string(length) + " tokens, more than a pack's " +
                                  std::to_string(capacity));
    }
    left[length].push_back(i);  // pushed backwards: back() is the first in input order
  }
  std::vector<std::vector<int64_t>> packs;
  while (!left.empty()) {
    std::vector<int64_t> pack;
    int64_t room = capacity;
    for (auto fit = left.upper_bound(room); fit != left.begin(); fit = left.upper_bound(room)) {
      --fit;  // the longest samples that fit in `room`
      pack.push_back(fit->second.back());
      room -= fit->first;
      fit->second.pop_back();
      if (fit->second.empty()) left.erase(fit);
    }
    packs.push_back(std::move(pack));
  }
  return packs;
}

}  // namespace megacpp::io::data
