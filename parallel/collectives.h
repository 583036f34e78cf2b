// The collective layer: every communication of megacpp goes through these functions, on
// Gloo and NCCL alike. Tensor-level all-gather and reduce-scatter are emulated where Debian's
// Gloo lacks them (Note [Gloo emulations] in collectives.cpp).
#pragma once

#include <functional>

#include <ATen/core/Tensor.h>

#include "parallel/group.h"

namespace c10d {
class Work;
}

namespace megacpp::parallel {

enum class ReduceOp { kSum, kAvg, kMax };  // kMax: all_reduce only

// A collective in flight. wait() blocks until its result is in the output tensor; it is a
// no-op for collectives that finished synchronously and safe to call twice.
class PendingCollective {
 public:
  PendingCollective() = default;
  PendingCollective(c10::intrusive_ptr<c10d::Work> work, std::function<void()> finish);
  void wait();

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::function<void()> finish_;  // local post-processing once the work is done
};

// output [size * n] <- concatenation of every member's input [n], in group-rank order.
PendingCollective all_gather_into_tensor(const Group& group, const at::Tensor& output,
                                         const at::Tensor& input);
// Every member's `x` (all of one shape) concatenated along `dim` in group-rank order; blocks
// until done (a tensor parallel slice made whole, a slice of each sequence gathered).
at::Tensor all_gather_along(const Group& group, const at::Tensor& x, int64_t dim);

// output [n] <- reduction over members of their input[rank * n : (rank + 1) * n].
// input [size * n]. On Gloo the summation order is the group-rank order (deterministic).
PendingCollective reduce_scatter_tensor(const Group& group, const at::Tensor& output,
                                        const at::Tensor& input, ReduceOp op);

// In place over the group.
PendingCollective all_reduce(const Group& group, const at::Tensor& tensor, ReduceOp op);
// The mean over the group of one value per rank (every rank gets it); a double on `device`.
double average_over_ranks(const Group& group, double value, const c10::Device& device);

// In place: every member receives `root` member's tensor (root is a group rank).
PendingCollective broadcast(const Group& group, const at::Tensor& tensor, int root);

// output [size * n] block j <- member j's input block `rank`; input [size * n].
PendingCollective all_to_all_single(const Group& group, const at::Tensor& output,
                                    const at::Tensor& input);

// How many calls of each collective this process has made, for tests and benchmarks that
// check what the engine communicates.
struct CollectiveCounts {
  int64_t all_gather = 0, reduce_scatter = 0, all_reduce = 0, broadcast = 0, all_to_all = 0;
};
CollectiveCounts collective_counts();

}  // namespace megacpp::parallel
