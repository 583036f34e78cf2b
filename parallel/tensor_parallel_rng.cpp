#include "parallel/tensor_parallel_rng.h"

#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "parallel/recompute.h"

namespace megacpp::parallel {
namespace {

constexpr uint64_t kSeedOffset = 2718;  // Megatron's model_parallel_cuda_manual_seed

// The default generators' states from before the fork, kept from the pre-hook to the post-hook.
struct KeptStates {
  std::vector<at::Generator> generators;
  std::vector<at::Tensor> states;
};

}  // namespace

void fork_random_numbers(Module& module, const Group& group) {
  auto kept = std::make_shared<KeptStates>();
  const int rank = group.rank;
  module.add_pre_hook([kept, rank](Module& self, const Module::Tensors& inputs) {
    if (!self.is_training()) return inputs;
    const int64_t drawn = torch::randint(std::numeric_limits<int64_t>::max(), {1}, torch::kLong).item<int64_t>();
    kept->generators = default_generators_for(inputs);
    kept->states.clear();
    for (auto& generator : kept->generators) {
      std::lock_guard<std::mutex> lock(generator.mutex());
      kept->states.push_back(generator.get_state());
      generator.set_current_seed(static_cast<uint64_t>(drawn) + kSeedOffset + static_cast<uint64_t>(rank));
    }
    return inputs;
  });
  module.add_post_hook([kept](Module&, const Module::Tensors&, const Module::Tensors& outputs) {
    for (size_t i = 0; i < kept->states.size(); ++i) {
      std::lock_guard<std::mutex> lock(kept->generators[i].mutex());
      kept->generators[i].set_state(kept->states[i]);
    }
    kept->generators.clear();
    kept->states.clear();
    return outputs;
  });
}

}  // namespace megacpp::parallel
