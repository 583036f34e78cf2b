#include "parallel/tiled_forward.h"

#include <torch/torch.h>

#include "parallel/module.h"
#include "parallel/recompute.h"

namespace megacpp::parallel {

void enable_tiled_forward(Module& module, int tiles, int64_t dim) {
  TORCH_CHECK(tiles >= 1, "enable_tiled_forward: tiles must be >= 1, got ", tiles);
  if (tiles == 1) return;
  module.add_forward_wrapper([tiles, dim](const Module::Forward& forward, const Module::Tensors& inputs) {
    TORCH_CHECK(!inputs.empty() && inputs[0].defined(), "a tiled forward needs an input");
    if (inputs[0].size(dim) < tiles) return forward(inputs);
    // One split per input: their backward gathers the tiles' gradients into one tensor.
    std::vector<std::vector<at::Tensor>> pieces;
    for (const auto& x : inputs) pieces.push_back(x.chunk(tiles, dim));
    std::vector<Module::Tensors> outputs;
    for (size_t t = 0; t < pieces[0].size(); ++t) {
      Module::Tensors tile;
      for (const auto& p : pieces) tile.push_back(p.at(t));
      outputs.push_back(run_recomputed(forward, tile));
    }
    Module::Tensors joined;
    for (size_t k = 0; k < outputs[0].size(); ++k) {
      std::vector<at::Tensor> parts;
      for (const auto& out : outputs) parts.push_back(out[k]);
      joined.push_back(torch::cat(parts, dim));
    }
    return joined;
  });
}

}  // namespace megacpp::parallel
