#include "training/reporting/parameter_dump.h"

#include <stdexcept>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "io/serialization/atomic_file.h"
#include "checkpoint/tensor_convert.h"
#include "io/serialization/torch_save.h"
#include "parallel/fsdp/fully_shard.h"

namespace megacpp::training::reporting {

void dump_parameters(torch::nn::Module& model, const std::string& path, int rank) {
  auto full = parallel::fsdp::gather_full_parameters(model);  // collective
  if (rank != 0) return;
  std::vector<std::pair<io::serialization::PyValue, io::serialization::PyValue>> items;
  for (auto& [name, tensor] : full) {
    items.emplace_back(io::serialization::PyValue::string(name),
                       io::serialization::PyValue::tensor(std::make_shared<io::serialization::RawTensor>(checkpoint::to_raw(tensor))));
  }
  try {
    io::serialization::write_file_atomically(path, io::serialization::torch_save(io::serialization::PyValue::dict(std::move(items))));
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("--dump-final-params: ") + e.what());
  }
  spdlog::info("wrote final parameters ({} tensors) to {}", full.size(), path);
}

}  // namespace megacpp::training::reporting
