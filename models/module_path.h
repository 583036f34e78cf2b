// Module path patterns of fsdp2_config.yaml: dotted module names whose segments may each be a
// brace group, e.g. "layers.{*}" (any single segment), "layers.{0-3,6}" (indices), "norm",
// "layers.{*}.mlp.experts.{*}" (MindSpeed's pattern for every expert of every layer).
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
  // One dotted segment: literal text, or text around one brace group.
  struct Segment {
    std::string prefix, suffix;
    bool has_group = false;
    bool any = false;                            // {*}
    std::vector<std::pair<long, long>> ranges;   // {0-3,6} -> (0,3), (6,6)
    bool matches(const std::string& segment) const;
  };
  static Segment parse_segment(const std::string& text, const std::string& pattern);

  std::string text_;
  std::vector<Segment> segments_;
};

// Paths of modules in `root` (pre-order, "" is the root) matched by any of `patterns`. A
// pattern that matches nothing is an error naming `key` and the pattern.
std::vector<std::string> match_module_paths(torch::nn::Module& root,
                                            const std::vector<std::string>& patterns,
                                            const std::string& key);

// Paths of every module in `root`, children before parents (the root, "", last).
std::vector<std::string> post_order_module_paths(torch::nn::Module& root);

// The paths of `order` that are in `subset`, in the order of `order`.
std::vector<std::string> in_order_of(const std::vector<std::string>& order, const std::vector<std::string>& subset);

}  // namespace megacpp::models
