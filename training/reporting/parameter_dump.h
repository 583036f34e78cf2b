// --dump-final-params: the gathered fp32 parameters in torch.save's format.
#pragma once

#include <string>

namespace torch::nn {
class Module;
}

namespace megacpp::training::reporting {

// Collective (gathers sharded parameters); rank 0 writes `path` with only the pickle opcodes
// torch.load(weights_only=True) accepts, so any PyTorch loads it.
void dump_parameters(torch::nn::Module& model, const std::string& path, int rank);

}  // namespace megacpp::training::reporting
