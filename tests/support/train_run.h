// megacpp-train runs for end-to-end tests: launch through megacpp-run, then read the numbers
// back from the Megatron-style log lines.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "tests/support/distributed_test.h"

namespace megacpp::testing {

// One "[rank N] memory (MB)" line's figures.
struct MemoryLine {
  double params = 0, grads = 0, optimizer_state = 0;  // sharded params, sharded grads, optimizer state
  double total() const { return params + grads + optimizer_state; }
};

struct TrainRun {
  CommandResult result;
  std::vector<double> losses;                           // "lm loss:" of each iteration line
  std::vector<std::pair<std::string, double>> validation;  // ("iteration 4" / "the end of ...", loss)
  std::vector<MemoryLine> memory;                       // each memory line, in output order
  std::vector<double> balance_losses;                   // "load_balancing_loss:" of each (MoE models)
};

// Flags the parity tests add for one more layout: Megatron's full recompute (of the first layer)
// on a model built on the meta device.
inline const char* const kRecomputeOnMetaDevice =
    " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --init-model-with-meta-device";

// `megacpp-run --nproc-per-node RANKS --master-port 0 megacpp-train FLAGS`.
TrainRun train(int ranks, const std::string& flags);
// The same with another training program (one built on megacpp's launch::train_program, or an installed
// megacpp-train).
TrainRun train_with(const std::string& program, int ranks, const std::string& flags);
// The losses and memory lines of the output of any command that trained (a launch script).
TrainRun parse_training_output(CommandResult result);

// `megacpp-convert ARGS`.
CommandResult convert(const std::string& args);

// " --use-torch-fsdp2 --fsdp2-config-path DIR/NAME" with `yaml` written there.
std::string fsdp_flags(const std::string& dir, const std::string& name, const std::string& yaml);
// The run exited 0 with `iterations` iteration lines, each loss finite and positive.
void expect_trained(const TrainRun& run, size_t iterations);

// Same iteration losses (lm loss and load_balancing_loss) and validation losses, each within
// `rtol` (relative).
void expect_same_losses(const TrainRun& reference, const TrainRun& run, const std::string& what, double rtol);

// The iterations after `from` of a run, as a run of their own (to compare a resumed run's with
// expect_same_losses): its later losses and the validations after iteration `from`.
TrainRun iterations_after(const TrainRun& run, size_t from);

// The same names and shapes in two --dump-final-params files, every value within 1e-4
// relative and 1e-5 absolute (see the definition).
void expect_same_params(const std::string& reference_path, const std::string& path, const std::string& what);

// The tensors of a Dict[str, Tensor] saved in torch.save's format (--dump-final-params).
std::map<std::string, at::Tensor> read_tensor_dict(const std::string& path);

// Writes `text` to DIR/NAME and returns the path.
std::string write_file(const std::string& dir, const std::string& name, const std::string& text);
// The whole of the file at `path` ("" when it cannot be read).
std::string read_file(const std::string& path);

// (tag, step) -> value of the TensorBoard event files in `dir`, as tests/reference/
// tensorboard_events.py decodes them (independently of megacpp's writer).
std::map<std::pair<std::string, int64_t>, double> read_tensorboard(const std::string& dir);

}  // namespace megacpp::testing
