#include "models/module_path.h"

#include <stdexcept>

namespace megacpp::models {
namespace {

long parse_index(const std::string& text, const std::string& pattern) {
  size_t used = 0;
  long value = -1;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || value < 0) {
    throw std::invalid_argument("module pattern '" + pattern + "': '" + text + "' is not an index");
  }
  return value;
}

bool is_index(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

ModulePathPattern::ModulePathPattern(const std::string& pattern) : text_(pattern) {
  const size_t open = pattern.find('{');
  if (open == std::string::npos) {
    if (pattern.find('}') != std::string::npos) throw std::invalid_argument("module pattern '" + pattern + "': unmatched '}'");
    prefix_ = pattern;
    return;
  }
  const size_t close = pattern.find('}', open);
  if (close == std::string::npos || pattern.find('{', open + 1) != std::string::npos ||
      pattern.find('}', close + 1) != std::string::npos) {
    throw std::invalid_argument("module pattern '" + pattern + "': use exactly one {...} group");
  }
  has_group_ = true;
  prefix_ = pattern.substr(0, open);
  suffix_ = pattern.substr(close + 1);
  const std::string body = pattern.substr(open + 1, close - open - 1);
  if (body == "*") {
    any_ = true;
    return;
  }
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dash = item.find('-');
    long lo = parse_index(dash == std::string::npos ? item : item.substr(0, dash), pattern);
    long hi = dash == std::string::npos ? lo : parse_index(item.substr(dash + 1), pattern);
    if (hi < lo) throw std::invalid_argument("module pattern '" + pattern + "': empty range '" + item + "'");
    ranges_.emplace_back(lo, hi);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

bool ModulePathPattern::segment_matches(const std::string& segment) const {
  if (segment.empty() || segment.find('.') != std::string::npos) return false;
  if (any_) return true;
  if (!is_index(segment)) return false;
  const long index = std::stol(segment);
  for (auto& [lo, hi] : ranges_) {
    if (index >= lo && index <= hi) return true;
  }
  return false;
}

bool ModulePathPattern::matches(const std::string& path) const {
  if (!has_group_) return path == prefix_;
  if (path.size() < prefix_.size() + suffix_.size()) return false;
  if (path.compare(0, prefix_.size(), prefix_) != 0) return false;
  if (path.compare(path.size() - suffix_.size(), suffix_.size(), suffix_) != 0) return false;
  return segment_matches(path.substr(prefix_.size(), path.size() - prefix_.size() - suffix_.size()));
}

namespace {

// Hugging Face's causal LMs keep the decoder under `model.` (model.layers.0, model.embed_tokens)
// where megacpp's models have it at the root: a pattern that starts with "model." and matches
// nothing as written is matched without that prefix.
bool matches_anything(torch::nn::Module& root, const ModulePathPattern& pattern) {
  for (auto& item : root.named_modules("", /*include_self=*/true)) {
    if (pattern.matches(item.key())) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> match_module_paths(torch::nn::Module& root,
                                            const std::vector<std::string>& patterns,
                                            const std::string& key) {
  std::vector<ModulePathPattern> compiled;
  for (auto& p : patterns) {
    compiled.emplace_back(p);
    if (p.rfind("model.", 0) == 0 && !matches_anything(root, compiled.back())) {
      ModulePathPattern without_prefix(p.substr(6));
      if (matches_anything(root, without_prefix)) compiled.back() = without_prefix;
    }
  }
  std::vector<bool> used(compiled.size(), false);
  std::vector<std::string> out;
  for (auto& item : root.named_modules("", /*include_self=*/true)) {
    bool hit = false;
    for (size_t i = 0; i < compiled.size(); ++i) {
      if (compiled[i].matches(item.key())) used[i] = hit = true;
    }
    if (hit) out.push_back(item.key());
  }
  for (size_t i = 0; i < compiled.size(); ++i) {
    if (!used[i]) {
      throw std::invalid_argument(key + ": pattern '" + compiled[i].text() + "' matches no module of the model");
    }
  }
  return out;
}

}  // namespace megacpp::models
