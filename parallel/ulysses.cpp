#include "parallel/ulysses.h"

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/group_capsule.h"

namespace megacpp::parallel {
namespace {

// Sends block j of [p, ...] to rank j and returns what rank j sent as block j.
at::Tensor exchange_blocks(const at::Tensor& blocks, const Group& group) {
  at::Tensor received = torch::empty_like(blocks);
  all_to_all_single(group, received, blocks).wait();
  return received;
}

at::Tensor to_heads(const at::Tensor& x, const Group& group) {
  const int64_t p = group.size(), batch = x.size(0), local_seq = x.size(1), width = x.size(2);
  TORCH_CHECK(width % p == 0, "Ulysses: the heads' width ", width, " does not split over ", p, " ranks");
  // Block j: heads [j*h/p, (j+1)*h/p) of this rank's tokens, for rank j.
  at::Tensor blocks = x.view({batch, local_seq, p, width / p}).permute({2, 0, 1, 3}).contiguous();
  // Block j of the result: rank j's tokens (slice j of the sequence), for this rank's heads.
  return exchange_blocks(blocks, group).permute({1, 0, 2, 3}).reshape({batch, p * local_seq, width / p});
}

at::Tensor to_sequence(const at::Tensor& x, const Group& group) {
  const int64_t p = group.size(), batch = x.size(0), seq = x.size(1), width = x.size(2);
  TORCH_CHECK(seq % p == 0, "Ulysses: a sequence of ", seq, " tokens does not split over ", p, " ranks");
  at::Tensor blocks = x.view({batch, p, seq / p, width}).permute({1, 0, 2, 3}).contiguous();
  return exchange_blocks(blocks, group).permute({1, 2, 0, 3}).reshape({batch, seq / p, p * width});
}

template <bool kToHeads>
struct Exchange : torch::autograd::Function<Exchange<kToHeads>> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const c10::intrusive_ptr<GroupHolder>& holder) {
    ctx->saved_data["group"] = c10::IValue::make_capsule(holder);
    return kToHeads ? to_heads(x, holder->group) : to_sequence(x, holder->group);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto holder = c10::static_intrusive_pointer_cast<GroupHolder>(ctx->saved_data["group"].toCapsule());
    const Group& group = holder->group;
    const at::Tensor grad = grads[0].contiguous();
    return {kToHeads ? to_sequence(grad, group) : to_heads(grad, group), at::Tensor()};
  }
};

Module::Tensors one_tensor(const Module::Tensors& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1 && tensors[0].dim() == 3, "Ulysses: ", what, " must be one [batch, seq, width] tensor");
  return tensors;
}

}  // namespace

at::Tensor sequence_to_heads(const at::Tensor& x, const Group& group) {
  if (group.size() == 1) return x;
  return Exchange<true>::apply(x.contiguous(), c10::make_intrusive<GroupHolder>(group));
}

at::Tensor heads_to_sequence(const at::Tensor& x, const Group& group) {
  if (group.size() == 1) return x;
  return Exchange<false>::apply(x.contiguous(), c10::make_intrusive<GroupHolder>(group));
}

void split_output_by_heads(Module& module, const Group& group) {
  module.add_post_hook([group](Module&, const Module::Tensors&, const Module::Tensors& outputs) -> Module::Tensors {
    return {sequence_to_heads(one_tensor(outputs, "the output")[0], group)};
  });
}

void split_input_by_sequence(Module& module, const Group& group) {
  module.add_pre_hook([group](Module&, const Module::Tensors& inputs) -> Module::Tensors {
    return {heads_to_sequence(one_tensor(inputs, "the input")[0], group)};
  });
}

at::Tensor sequence_slice(const at::Tensor& x, int64_t dim, const Group& group) {
  const int64_t n = x.size(dim), p = group.size();
  TORCH_CHECK(n % p == 0, "Ulysses: a sequence of ", n, " tokens does not split over ", p, " ranks");
  return x.narrow(dim, group.rank * (n / p), n / p);
}

}  // namespace megacpp::parallel
