// The device mesh: the one object that knows how ranks are laid out. A 1-D mesh (fsdp) or,
// for HSDP, a 2-D mesh (ddp, fsdp) with rank = ddp_index * fsdp_size + fsdp_index, so the
// ranks of one shard group are contiguous (as in torch's init_device_mesh).
//
// Ulysses sequence parallelism (ROLL's ulysses_size) groups consecutive ranks, rank =
// data_index * ulysses_size + ulysses_index, independently of the fsdp/ddp layout: the ranks of
// a Ulysses group read the same samples (one data-parallel rank) and each computes a slice of
// every sequence. Parameters are sharded over fsdp as without it (ROLL's 8 ranks with
// ulysses_size 2, fsdp_size 4: ddp 2 x fsdp 4, four Ulysses pairs).
#pragma once

#include <memory>
#include <string>

#include "parallel/group.h"

namespace megacpp::parallel {

class DistributedRuntime;

class DeviceMesh {
 public:
  // fsdp_size <= 1 or >= world size: 1-D (fsdp = world). Otherwise HSDP with
  // ddp = world / fsdp_size; a size that does not divide the world is an error.
  // Collective: every rank must call it.
  // `ulysses_size` (1: none) must divide the world size.
  static DeviceMesh build(DistributedRuntime& runtime, int fsdp_size, int ulysses_size = 1);

  // A mesh of one process, for running without distribution.
  static DeviceMesh single();

  const Group& fsdp() const { return fsdp_; }  // shards parameters
  const Group& ddp() const { return ddp_; }    // replicates shards (size 1 unless HSDP)
  const Group& ulysses() const { return ulysses_; }  // splits each sequence (size 1 without)
  int world_size() const { return fsdp_.size() * ddp_.size(); }
  // Ranks that read different samples; gradients summed over all ranks are divided by it.
  int data_parallel_size() const { return world_size() / ulysses_.size(); }
  int data_parallel_rank() const { return (ddp_.rank * fsdp_.size() + fsdp_.rank) / ulysses_.size(); }
  bool is_hsdp() const { return ddp_.size() > 1; }
  std::string describe() const;  // e.g. "HSDP (ddp=2, fsdp=2), Ulysses 2"

 private:
  Group fsdp_;
  Group ddp_;
  Group ulysses_;
};

// Resolves a requested fsdp size against the world; throws naming `key` when it is invalid.
int resolve_fsdp_size(int requested, int world_size, const std::string& key);

}  // namespace megacpp::parallel
