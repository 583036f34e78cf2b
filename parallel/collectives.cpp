// Note [Gloo emulations]
// Debian's libtorch 1.13 ProcessGroupGloo throws for `_allgather_base` and `reduce_scatter`.
// There (compat::kGlooHasTensorCollectives is false) we emulate them with operations it has:
//  - all-gather into one tensor: `allgather` into the [size] views of the output (Gloo
//    copies its flat result back into them);
//  - reduce-scatter: `alltoall_base` sends block j of the input to member j, then each member
//    sums the `size` blocks it received in group-rank order. Traffic equals a real
//    reduce-scatter's, and the result does not depend on a ring order.
// libtorch 2.x's Gloo has both natively (`_allgather_base`, `_reduce_scatter_base`).
// Gloo has no bfloat16, so bf16 tensors travel reinterpreted as fp16 (the same 2 bytes,
// only moved, never computed on), and 16-bit reductions happen locally or in fp32.
#include "parallel/collectives.h"

#include <atomic>

#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/torch.h>

namespace megacpp::parallel {
namespace {

struct AtomicCounts {
  std::atomic<int64_t> all_gather{0}, reduce_scatter{0}, all_reduce{0}, broadcast{0}, all_to_all{0};
};
AtomicCounts counts;

bool is_half_precision(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
}

// Note [Gloo emulations]: bf16 data moves through Gloo as fp16 bits.
at::Tensor as_transport(const Group& group, const at::Tensor& t) {
  return group.is_gloo() && t.scalar_type() == at::kBFloat16 ? t.view(at::kHalf) : t;
}

void check_member(const Group& group, const char* op) {
  TORCH_CHECK(group.contains_me(), op, ": this rank is not a member of group ", group.describe());
}

void check_sizes(const at::Tensor& big, const at::Tensor& small, int size, const char* op) {
  TORCH_CHECK(big.is_contiguous() && small.is_contiguous(), op, ": tensors must be contiguous");
  TORCH_CHECK(big.numel() == small.numel() * size, op, ": expected ", size, " x ", small.numel(),
              " elements, got ", big.numel());
  TORCH_CHECK(big.scalar_type() == small.scalar_type(), op, ": dtypes differ (",
              big.scalar_type(), " vs ", small.scalar_type(), ")");
}

// Note [Gloo emulations]: on 1.13's Gloo, reduce-scatter is an all-to-all plus a local sum.
PendingCollective emulated_reduce_scatter(const Group& group, const at::Tensor& output, const at::Tensor& input,
                                          std::function<void()> finish_average) {
  const int size = group.size();
  at::Tensor received = at::empty_like(input);
  at::Tensor received_wire = as_transport(group, received), input_wire = as_transport(group, input);
  std::vector<int64_t> even_split;  // empty: equal blocks
  auto work = group.backend->alltoall_base(received_wire, input_wire, even_split, even_split);
  auto finish = [received, output, size, finish_average] {
    at::Tensor blocks = received.view({size, -1});
    auto accumulate = is_half_precision(received) ? at::kFloat : received.scalar_type();
    at::Tensor sum = blocks[0].to(accumulate, /*non_blocking=*/false, /*copy=*/true);
    for (int j = 1; j < size; ++j) sum.add_(blocks[j]);
    output.view({-1}).copy_(sum);
    finish_average();
  };
  return PendingCollective(work, finish);
}

}  // namespace

PendingCollective::PendingCollective(c10::intrusive_ptr<c10d::Work> work,
                                     std::function<void()> finish)
    : work_(std::move(work)), finish_(std::move(finish)) {}

void PendingCollective::wait() {
  if (work_) {
    work_->wait();
    work_.reset();
  }
  if (finish_) {
    auto finish = std::move(finish_);
    finish_ = nullptr;
    finish();
  }
}

PendingCollective all_gather_into_tensor(const Group& group, const at::Tensor& output,
                                         const at::Tensor& input) {
  check_member(group, "all_gather_into_tensor");
  ++counts.all_gather;
  check_sizes(output, input, group.size(), "all_gather_into_tensor");
  if (!group.backend) {
    output.copy_(input);
    return {};
  }
  at::Tensor out = as_transport(group, output), in = as_transport(group, input);
  if (!compat::kGlooHasTensorCollectives && group.is_gloo()) {
    std::vector<std::vector<at::Tensor>> outputs{out.view({-1}).chunk(group.size())};
    std::vector<at::Tensor> inputs{in.view({-1})};
    return {group.backend->allgather(outputs, inputs), nullptr};
  }
  return {group.backend->_allgather_base(out, in), nullptr};
}

at::Tensor all_gather_along(const Group& group, const at::Tensor& x, int64_t dim) {
  const at::Tensor blocks = x.movedim(dim, 0).contiguous();  // each member's block contiguous
  at::Tensor out = at::empty({group.size() * blocks.numel()}, blocks.options());
  all_gather_into_tensor(group, out, blocks.reshape({-1})).wait();
  std::vector<int64_t> shape = blocks.sizes().vec();
  shape[0] *= group.size();
  return out.view(shape).movedim(0, dim);
}

PendingCollective reduce_scatter_tensor(const Group& group, const at::Tensor& output,
                                        const at::Tensor& input, ReduceOp op) {
  check_member(group, "reduce_scatter_tensor");
  ++counts.reduce_scatter;
  check_sizes(input, output, group.size(), "reduce_scatter_tensor");
  TORCH_CHECK(op != ReduceOp::kMax, "reduce_scatter_tensor sums or averages; it does not take the maximum");
  const int size = group.size();
  auto finish_average = [output, size, op] {
    if (op == ReduceOp::kAvg && size > 1) output.div_(size);
  };
  if (!group.backend) {
    output.copy_(input);
    return {};
  }
  if (group.is_gloo() && !compat::kGlooHasTensorCollectives) return emulated_reduce_scatter(group, output, input, finish_average);
  c10d::ReduceScatterOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  if (group.is_gloo() && is_half_precision(input)) {
    // Gloo cannot reduce 16-bit floats: reduce fp32 copies.
    at::Tensor out32 = at::empty(output.sizes(), output.options().dtype(at::kFloat)), in32 = input.to(at::kFloat);
    return {group.backend->_reduce_scatter_base(out32, in32, options), [output, out32, finish_average] {
              output.copy_(out32);
              finish_average();
            }};
  }
  // One flat input, as FSDP2 passes it (NCCL's list form would copy it into a flat buffer first).
  at::Tensor out = output, in = input;
  return {group.backend->_reduce_scatter_base(out, in, options), finish_average};
}

PendingCollective all_reduce(const Group& group, const at::Tensor& tensor, ReduceOp op) {
  check_member(group, "all_reduce");
  ++counts.all_reduce;
  const int size = group.size();
  if (!group.backend) return {};
  // Gloo cannot reduce 16-bit floats: reduce an fp32 copy.
  at::Tensor buffer = group.is_gloo() && is_half_precision(tensor) ? tensor.to(at::kFloat) : tensor;
  std::vector<at::Tensor> tensors{buffer};
  c10d::AllreduceOptions options;
  options.reduceOp = op == ReduceOp::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  auto work = group.backend->allreduce(tensors, options);
  return {work, [tensor, buffer, op, size] {
            if (op == ReduceOp::kAvg) buffer.div_(size);
            if (!buffer.is_same(tensor)) tensor.copy_(buffer);
          }};
}

double average_over_ranks(const Group& group, double value, const c10::Device& device) {
  at::Tensor t = torch::full({1}, value, torch::TensorOptions().dtype(torch::kDouble).device(device));
  all_reduce(group, t, ReduceOp::kAvg).wait();
  return t.item<double>();
}

PendingCollective broadcast(const Group& group, const at::Tensor& tensor, int root) {
  check_member(group, "broadcast");
  ++counts.broadcast;
  TORCH_CHECK(root >= 0 && root < group.size(), "broadcast: root ", root, " outside group ",
              group.describe());
  if (!group.backend) return {};
  std::vector<at::Tensor> tensors{as_transport(group, tensor)};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  return {group.backend->broadcast(tensors, options), nullptr};
}

PendingCollective all_to_all_single(const Group& group, const at::Tensor& output,
                                    const at::Tensor& input) {
  check_member(group, "all_to_all_single");
  ++counts.all_to_all;
  TORCH_CHECK(output.numel() == input.numel() && input.numel() % group.size() == 0,
              "all_to_all_single: input and output need the same numel, divisible by ",
              group.size());
  if (!group.backend) {
    output.copy_(input);
    return {};
  }
  std::vector<int64_t> even_split;  // empty: equal blocks
  at::Tensor out = as_transport(group, output), in = as_transport(group, input);
  return {group.backend->alltoall_base(out, in, even_split, even_split), nullptr};
}

CollectiveCounts collective_counts() {
  return {counts.all_gather.load(), counts.reduce_scatter.load(), counts.all_reduce.load(), counts.broadcast.load(),
          counts.all_to_all.load()};
}

}  // namespace megacpp::parallel
