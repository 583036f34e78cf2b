// Note [Tensor parallelism]
// Megatron's tensor parallelism: the ranks of a TP group (mesh.tp(), consecutive ranks) each
// hold a slice of a layer's weights and compute that slice of its work.
//   column-parallel  the weight [out, in] split on dim 0 (and the bias with it): each rank
//                    computes its share of the outputs (its attention heads, its FFN columns);
//   row-parallel     the weight split on dim 1: each rank multiplies its share of the inputs and
//                    an all-reduce sums the partial outputs (forward only); its bias, whole on
//                    every rank, is added once after the sum;
//   block input      before the first column-parallel layers of a block, the identity forward
//                    and an all-reduce of the input's gradient in backward (each rank's
//                    gradient covers only its share of the outputs);
//   partial gradient a replicated parameter read only by the rank's share of the work (Qwen3's
//                    q/k norms act on the rank's heads): every rank holds all of it, and its
//                    gradients are summed over the TP group after backward.
// So one all-reduce per block in forward and one in backward. The token embedding and the output
// layer are split by vocabulary (Note [Vocabulary parallelism] in parallel/vocab_parallel.h);
// the other norms are replicated with the same gradient on every TP rank.
//
// Slices are real tensors: the module computes with its slice and never knows (attention reads
// its head count from its projections' outputs). Each split parameter records its placement (the
// split dimension, the group, the full shape), which follows it into FSDP2's sharded master: the
// full shape, initialization, gathering and checkpoints read it. FSDP2 then shards the slice on
// dim 0 over the fsdp group (2D, as torchtitan's FSDP2 x TP). What is split where is the model's
// to say (models/tensor_parallel.h: by layer type, or the family's plan); this layer only slices
// and communicates. A fused projection's weight ([q; k; v]) splits in parts: each rank its share
// of each part, and a checkpoint holds a rank's rows as a block per part.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "parallel/group.h"
#include "parallel/module.h"

namespace megacpp::parallel {

struct TensorParallelPlacement {
  Group group;                      // the TP group
  int dim = -1;                     // the split dimension; -1: replicated with partial gradients
  std::vector<int64_t> full_shape;  // of the whole parameter (its own shape when replicated)
  // The split dimension holds `parts` equal parts (a fused [q; k; v] projection: 3), each split
  // over the group: a rank's slice is its share of every part, in order. Only along dim 0.
  int64_t parts = 1;

  bool is_split() const { return dim >= 0; }
  // Along the split dimension (of a split placement): the length of a part, of the share of it
  // that each rank holds, and where this rank's share of part `k` starts in the whole.
  int64_t part() const { return full_shape[dim] / parts; }
  int64_t share() const { return part() / group.size(); }
  int64_t share_start(int64_t k) const { return k * part() + group.rank * share(); }
};

// Keeps `group.rank`'s slice of `module`'s parameter `slot` along `dim` (equal slices of each of
// `parts` parts; the sizes must divide, checked by the caller with the model's names) and
// records its placement.
void split_parameter(Module& module, const std::string& slot, int dim, const Group& group, int64_t parts = 1);
// Records that `module`'s parameter `slot` is replicated over `group` but gets a partial gradient
// on each rank (all_reduce_partial_gradients sums them).
void mark_partial_gradient(Module& module, const std::string& slot, const Group& group);

// The placement recorded for `param` (a split or marked tensor, or the FSDP2 master made from
// one), or null for a parameter tensor parallelism does not touch.
const TensorParallelPlacement* tensor_parallel_placement(const at::Tensor& param);
// Records for `to` the placement of `from`, if any (FSDP2's master made from a TP slice).
void carry_tensor_parallel_placement(const at::Tensor& from, const at::Tensor& to);

// This rank's slice of `full` for a split placement; `full` itself otherwise.
at::Tensor tensor_parallel_slice(const at::Tensor& full, const TensorParallelPlacement& placement);
// The whole tensor from every rank's `local` slice (collective over the TP group; the parts put
// back in order); `local` when not split.
at::Tensor gather_tensor_parallel(const at::Tensor& local, const TensorParallelPlacement& placement);

// A pre-hook on `module`: its first input passes unchanged; its gradient is all-reduced.
void all_reduce_input_gradient(Module& module, const Group& group);
// A post-hook on `module`: its one output is all-reduced (the sum of the row-parallel parts).
void all_reduce_output(Module& module, const Group& group);
// A row-parallel `module` whose parameter `slot` (its bias) every rank adds to its partial
// output: post-hooks that take the bias out, then `add_reduction()` (which adds the hook that
// sums the parts: all_reduce_output, or sequence parallelism's reduce-scatter), then add it
// once. Its gradient is then whole on every rank (a partial one on a slice of the sequence).
void add_bias_once_around(Module& module, const std::string& slot, const std::function<void()>& add_reduction);
// A post-hook on `module`: its one output passes unchanged; its gradient is all-reduced (what
// the vocabulary-parallel output layer reads, Note [Vocabulary parallelism]).
void all_reduce_output_gradient(Module& module, const Group& group);

// Sums over their TP groups the gradients of the parameters marked partial (after backward, on
// whatever FSDP2 left: the same shard on every rank of a TP group), one flat all-reduce per group
// and dtype. Collective.
void all_reduce_partial_gradients(const std::vector<at::Tensor>& params, const c10::Device& device);

}  // namespace megacpp::parallel
