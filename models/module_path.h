// Module path patterns of fsdp2_config.yaml: dotted module names with at most one brace
// group, e.g. "layers.{*}" (any single segment), "layers.{0-3,6}" (indices), "norm".
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>

namespace megacpp::models {

class ModulePathPattern {
 public:
  // Throws std::invalid_argument naming `pattern` when it is malformed.
  explicit ModulePathPattern(const std::string& pattern);
  bool matches(const std::string& path) const;
  const std::string& text() const { return text_; }

 private:
  bool segment_matches(const std::string& segment) const;

  std::string text_, prefix_, suffix_;
  bool has_group_ = false;
  bool any_ = false;                                 // {*}
  std::vector<std::pair<long, long>> ranges_;        // {0-3,6} -> (0,3), (6,6)
};

// Paths of modules in `root` (pre-order, "" is the root) matched by any of `patterns`. A
// pattern that matches nothing is an error naming `key` and the pattern.
std::vector<std::string> match_module_paths(torch::nn::Module& root,
                                            const std::vector<std::string>& patterns,
                                            const std::string& key);

}  // namespace megacpp::models
