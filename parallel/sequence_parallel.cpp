#include "parallel/sequence_parallel.h"

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/group_capsule.h"

namespace megacpp::parallel {
namespace {

constexpr int64_t kSequenceDim = 1;

at::Tensor sequence_reduce_scattered(const at::Tensor& x, const Group& group) {
  const int64_t seq = x.size(kSequenceDim), p = group.size();
  TORCH_CHECK(seq % p == 0, "sequence parallelism: a sequence of ", seq, " tokens does not split over ", p,
              " tensor-parallel ranks");
  const at::Tensor blocks = x.transpose(0, kSequenceDim).contiguous();
  at::Tensor out = torch::empty({blocks.numel() / p}, blocks.options());
  reduce_scatter_tensor(group, out, blocks.reshape({-1}), ReduceOp::kSum).wait();
  std::vector<int64_t> shape = blocks.sizes().vec();
  shape[0] /= p;
  return out.view(shape).transpose(0, kSequenceDim);
}

at::Tensor sequence_sliced(const at::Tensor& x, const Group& group) {
  const int64_t seq = x.size(kSequenceDim), p = group.size();
  TORCH_CHECK(seq % p == 0, "sequence parallelism: a sequence of ", seq, " tokens does not split over ", p,
              " tensor-parallel ranks (--seq-length must divide by --tensor-model-parallel-size)");
  return x.narrow(kSequenceDim, group.rank * (seq / p), seq / p).contiguous();
}

enum class SequenceMove { kGatherReduceScatter, kGatherSlice, kReduceScatterGather, kSliceGather };

template <SequenceMove kKind>
struct SequenceExchange : torch::autograd::Function<SequenceExchange<kKind>> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const c10::intrusive_ptr<GroupHolder>& holder) {
    ctx->saved_data["group"] = c10::IValue::make_capsule(holder);
    const Group& group = holder->group;
    if (kKind == SequenceMove::kReduceScatterGather) return sequence_reduce_scattered(x, group);
    if (kKind == SequenceMove::kSliceGather) return sequence_sliced(x, group);
    return all_gather_along(group, x, kSequenceDim);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    const auto holder = c10::static_intrusive_pointer_cast<GroupHolder>(ctx->saved_data["group"].toCapsule());
    const Group& group = holder->group;
    const at::Tensor& grad = grads[0];
    if (kKind == SequenceMove::kGatherReduceScatter) return {sequence_reduce_scattered(grad, group), at::Tensor()};
    if (kKind == SequenceMove::kGatherSlice) return {sequence_sliced(grad, group), at::Tensor()};
    return {all_gather_along(group, grad, kSequenceDim), at::Tensor()};
  }
};

template <SequenceMove kKind>
at::Tensor move_sequence(const at::Tensor& x, const Group& group) {
  return SequenceExchange<kKind>::apply(x, c10::make_intrusive<GroupHolder>(group));
}

template <SequenceMove kKind>
void on_sequence_output(Module& module, const Group& group) {
  module.add_post_hook([group](Module&, const Module::Tensors&, const Module::Tensors& outputs) -> Module::Tensors {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].dim() >= 2, "sequence parallelism: ", "the output must be one [batch, seq, ...] tensor");
    return {move_sequence<kKind>(outputs[0], group)};
  });
}

template <SequenceMove kKind>
void on_sequence_input(Module& module, const Group& group) {
  module.add_pre_hook([group](Module&, const Module::Tensors& inputs) {
    Module::Tensors out = inputs;
    out.at(0) = move_sequence<kKind>(inputs[0], group);
    return out;
  });
}

}  // namespace

void gather_input_sequence(Module& module, const Group& group) { on_sequence_input<SequenceMove::kGatherReduceScatter>(module, group); }

void reduce_scatter_output_sequence(Module& module, const Group& group) { on_sequence_output<SequenceMove::kReduceScatterGather>(module, group); }
void scatter_output_sequence(Module& module, const Group& group) { on_sequence_output<SequenceMove::kSliceGather>(module, group); }
void gather_output_sequence(Module& module, const Group& group) { on_sequence_output<SequenceMove::kGatherReduceScatter>(module, group); }

void whole_sequence_inside(Module& module, const Group& group) {
  on_sequence_input<SequenceMove::kGatherSlice>(module, group);
  on_sequence_output<SequenceMove::kSliceGather>(module, group);
}

}  // namespace megacpp::parallel
