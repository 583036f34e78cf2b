// Note [Reading another group's parameter]
// Outside its own forward, an FSDP group holds only this rank's shard of each parameter: its
// modules' slots point at the fp32 master shard (FSDPParam::sharded), gathered only while the
// group computes. A module whose forward reads another module's parameter directly (an output
// layer tied to the embedding reading its weight, a block reusing another's weight) is fine when
// both are in one group, or the owner's group is around the reader's. When the owner is wrapped
// apart, the reader computes with the shard: a wrong result on one rank, and on several an
// error from libtorch that says nothing of why ("size of tensor a (64) must match b (32)"), or
// a mismatch much later, in the loss.
//
// Two checks name the parameter, its group and the rule instead. The root's first forward with
// gradients walks the autograd graph of its outputs: a master shard there was read as a
// parameter (compute reads the gathered tensor, a separate leaf); on one rank too, where the
// shard is the whole parameter but its gradient would bypass the reduction. And a libtorch error
// about sizes in a forward is explained when they are those of a shard another group holds at
// that moment. What neither sees: reads by frozen parameters (no gradient, so no graph leaf) and
// reads inside recomputed modules (their forward runs without a graph, and again in backward).
#pragma once

#include <string>
#include <vector>

#include "parallel/fsdp/fsdp_param.h"
#include "parallel/module.h"

namespace megacpp::parallel::fsdp {

// A parameter of a sharded model: its path from the root and its group's module path ("" for
// the root's).
struct GroupParam {
  const FSDPParam* param;
  std::string path;
  std::string group;
};

// Throws std::invalid_argument naming the first of `params` whose master shard the graph of
// `outputs` (a forward of their model) reads, and what to do.
void check_no_sharded_reads(const std::vector<GroupParam>& params, const Module::Tensors& outputs);

// What `error`, thrown by a forward of their model, may come from: the `params` whose shards
// (their groups not computing) have the sizes it names; "" when none has.
std::string explain_sharded_read(const std::vector<GroupParam>& params, const std::string& error);

}  // namespace megacpp::parallel::fsdp
