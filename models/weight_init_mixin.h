// WeightInitMixin: MindSpeed's initialization rules, giving the same full weights for the
// same seed whatever the sharding (Note [Sharding-independent init] in the .cpp).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

#include "parallel/module.h"

namespace megacpp::models {

class WeightInitMixin {
 public:
  virtual ~WeightInitMixin() = default;

  // Linear weight ~ N(0, std), bias 0; Embedding ~ N(0, std); norm weights 1, biases 0; LoRA's
  // lora_A ~ U(-1/sqrt(in), 1/sqrt(in)) and lora_B 0, as PEFT.
  // Children before parents; modules already initialized are skipped.
  void init_weights(double std, uint64_t seed);

 protected:
  // Initializes one module's own parameters; returns false when no rule applies. Override
  // to add rules for custom layers (call the base for the standard ones).
  virtual bool init_module(const std::string& path, parallel::Module& module, double std, uint64_t seed);

  // Fills parameter `name` of `module` (at `path`) with N(0, std) / a constant, generated
  // full-size from a generator seeded by (seed, full parameter name).
  static void fill_normal(parallel::Module& module, const std::string& path, const std::string& name,
                          double std, uint64_t seed);
  static void fill_constant(parallel::Module& module, const std::string& name, double value);
  // The same with U(-bound, bound).
  static void fill_uniform(parallel::Module& module, const std::string& path, const std::string& name, double bound,
                           uint64_t seed);

 private:
  // LoRA's factors, before init_module so that no override can give them another rule.
  static bool init_lora(const std::string& path, parallel::Module& module, uint64_t seed);

  std::unordered_set<const parallel::Module*> initialized_;
};

}  // namespace megacpp::models
