#include "models/module_path.h"

#include <algorithm>
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

void post_order(torch::nn::Module& module, const std::string& path, std::vector<std::string>& out) {
  for (auto& child : module.named_children()) {
    post_order(*child.value(), path.empty() ? child.key() : path + "." + child.key(), out);
  }
  out.push_back(path);
}

bool is_index(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

ModulePathPattern::ModulePathPattern(const std::string& pattern) : text_(pattern) {
  size_t start = 0;
  while (true) {
    const size_t dot = pattern.find('.', start);
    segments_.push_back(parse_segment(pattern.substr(start, dot == std::string::npos ? std::string::npos : dot - start), pattern));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
}

ModulePathPattern::Segment ModulePathPattern::parse_segment(const std::string& text, const std::string& pattern) {
  Segment segment;
  const size_t open = text.find('{');
  if (open == std::string::npos) {
    if (text.find('}') != std::string::npos) throw std::invalid_argument("module pattern '" + pattern + "': unmatched '}'");
    segment.prefix = text;
    return segment;
  }
  const size_t close = text.find('}', open);
  if (close == std::string::npos || text.find('{', open + 1) != std::string::npos ||
      text.find('}', close + 1) != std::string::npos) {
    throw std::invalid_argument("module pattern '" + pattern + "': use at most one {...} group per dotted segment");
  }
  segment.has_group = true;
  segment.prefix = text.substr(0, open);
  segment.suffix = text.substr(close + 1);
  const std::string body = text.substr(open + 1, close - open - 1);
  if (body == "*") {
    segment.any = true;
    return segment;
  }
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dash = item.find('-');
    long lo = parse_index(dash == std::string::npos ? item : item.substr(0, dash), pattern);
    long hi = dash == std::string::npos ? lo : parse_index(item.substr(dash + 1), pattern);
    if (hi < lo) throw std::invalid_argument("module pattern '" + pattern + "': empty range '" + item + "'");
    segment.ranges.emplace_back(lo, hi);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return segment;
}

bool ModulePathPattern::Segment::matches(const std::string& segment) const {
  if (!has_group) return segment == prefix;
  if (segment.size() <= prefix.size() + suffix.size()) return false;  // the group matches something
  if (segment.compare(0, prefix.size(), prefix) != 0) return false;
  if (segment.compare(segment.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  if (any) return true;
  const std::string inner = segment.substr(prefix.size(), segment.size() - prefix.size() - suffix.size());
  if (!is_index(inner)) return false;
  const long index = std::stol(inner);
  for (auto& [lo, hi] : ranges) {
    if (index >= lo && index <= hi) return true;
  }
  return false;
}

bool ModulePathPattern::matches(const std::string& path) const {
  size_t start = 0;
  for (size_t i = 0; i < segments_.size(); ++i) {
    if (start > path.size()) return false;
    const size_t dot = path.find('.', start);
    const bool last = i + 1 == segments_.size();
    if (last != (dot == std::string::npos)) return false;  // as many segments as the pattern
    if (!segments_[i].matches(path.substr(start, last ? std::string::npos : dot - start))) return false;
    start = last ? path.size() : dot + 1;
  }
  return true;
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

std::vector<std::string> post_order_module_paths(torch::nn::Module& root) {
  std::vector<std::string> out;
  post_order(root, "", out);
  return out;
}

std::vector<std::string> in_order_of(const std::vector<std::string>& order, const std::vector<std::string>& subset) {
  std::vector<std::string> out;
  for (auto& path : order) {
    if (std::find(subset.begin(), subset.end(), path) != subset.end()) out.push_back(path);
  }
  return out;
}

}  // namespace megacpp::models
