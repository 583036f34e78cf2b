// Where GRPO's responses come from and where the trained weights go after each update: the
// rollout's side of the loop, colocated with the actor (ColocatedRollout: verl's hybrid engine,
// an unsharded copy of the model in the trainer's processes) or on ranks of its own
// (rl/remote_rollout.h: verl's and OpenRLHF's separate rollout engines).
#pragma once

#include <cstdint>
#include <vector>

#include "inference/generation.h"
#include "models/language_model.h"
#include "parallel/device_mesh.h"
#include "parallel/group.h"
#include "rl/weight_sync.h"

namespace megacpp::rl {

using Prompts = std::vector<std::vector<int64_t>>;

class RolloutEngine {
 public:
  virtual ~RolloutEngine() = default;
  // `responses_per_prompt` responses to each of `prompts`, prompt by prompt (prompt 0's first),
  // sampled by `sampling`. Collective over the actor's ranks (each passes its own prompts).
  virtual std::vector<inference::Generation> generate(const Prompts& prompts, int64_t responses_per_prompt,
                                                      const inference::Sampling& sampling) = 0;
  // Loads `actor`'s weights (sharded by FSDP2 or not) into the rollout's model. Collective over
  // the actor's ranks.
  virtual WeightSyncStats sync(models::LanguageModel& actor) = 0;
};

// The rollout in the actor's processes: `model` (unsharded, same family and shapes as the actor)
// generates, and takes the actor's weights one gathered parameter at a time (Note [Weight sync]).
class ColocatedRollout final : public RolloutEngine {
 public:
  explicit ColocatedRollout(models::LanguageModel& model) : model_(model) {}
  std::vector<inference::Generation> generate(const Prompts& prompts, int64_t responses_per_prompt,
                                              const inference::Sampling& sampling) override;
  WeightSyncStats sync(models::LanguageModel& actor) override { return sync_colocated_weights(actor, model_); }

 private:
  models::LanguageModel& model_;
};

// A colocated rollout's stand-in on the ranks of a TP or Ulysses group other than the first,
// which SharedByModelParallelGroup asks for no responses: it holds no copy of the model and
// takes part in each sync's gathers (collective over the actor's shard and TP groups) without
// keeping what they give, so that a group holds one rollout copy, not one per rank.
class SyncOnlyRollout final : public RolloutEngine {
 public:
  // Throws std::logic_error when asked for responses to any prompt.
  std::vector<inference::Generation> generate(const Prompts& prompts, int64_t responses_per_prompt,
                                              const inference::Sampling& sampling) override;
  WeightSyncStats sync(models::LanguageModel& actor) override;
};

// The rollout of an actor split within a group of ranks that train on the same prompts (a
// tensor-parallel group, or a Ulysses group splitting each sequence): only the group's first
// rank asks `inner` for responses (the others ask for none: a remote rollout generates each
// group's prompts once) and the group gets the first's, so that every rank of the group trains
// on the very same tokens. Syncs as `inner` does (every rank gathers).
class SharedByModelParallelGroup final : public RolloutEngine {
 public:
  SharedByModelParallelGroup(RolloutEngine& inner, const parallel::Group& group, const c10::Device& device)
      : inner_(inner), group_(group), device_(device) {}
  std::vector<inference::Generation> generate(const Prompts& prompts, int64_t responses_per_prompt,
                                              const inference::Sampling& sampling) override;
  WeightSyncStats sync(models::LanguageModel& actor) override { return inner_.sync(actor); }

 private:
  RolloutEngine& inner_;
  parallel::Group group_;
  c10::Device device_;
};

// The group of `mesh`'s ranks that train on the same prompts: its TP group, else its Ulysses group
// (one rank's own when neither; megacpp refuses both at once); and whether this rank is its first,
// the one that generates for it and counts its responses once.
const parallel::Group& model_parallel_group(const parallel::DeviceMesh& mesh);
inline bool first_of_model_parallel_group(const parallel::DeviceMesh& mesh) { return model_parallel_group(mesh).rank == 0; }

// Each prompt `times` times in a row.
Prompts repeat_each(const Prompts& prompts, int64_t times);

}  // namespace megacpp::rl
