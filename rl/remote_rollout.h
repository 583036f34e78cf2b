// Note [Remote rollout]
// Rollout workers on ranks of their own (rl/rollout_groups.h), as verl and OpenRLHF run their
// rollout engines apart from the trainer. At each step the trainer ranks' prompts reach every
// worker in one all-gather over all ranks, led by the sampling settings (so the workers sample
// exactly as the trainer asked, with no configuration of their own); prompt j of the step
// (counting trainer rank 0's first) goes to worker j mod W, which samples the responses to its
// prompts in one batch, with the step's seed plus its index. A second all-gather tells every rank
// whether a worker failed (its error, naming it, is thrown everywhere); a third brings the
// responses back, and each trainer rank keeps its own. sync() is a request too: the workers then
// receive the weights (Note [Weight sync over a process group]), and wait for the next request.
// finish() ends the workers' loop.
#pragma once

#include <cstdint>
#include <vector>

#include "rl/rollout_engine.h"
#include "rl/rollout_groups.h"
#include "rl/weight_broadcast.h"

namespace megacpp::rl {

// The trainer's side: every trainer rank holds one.
class RemoteRollout final : public RolloutEngine {
 public:
  // The handshake and the first sync, collective with the workers' RolloutWorker constructors.
  RemoteRollout(models::LanguageModel& actor, const RolloutGroups& groups, const WeightBroadcastOptions& options = {});
  std::vector<inference::Generation> generate(const Prompts& prompts, int64_t responses_per_prompt,
                                              const inference::Sampling& sampling) override;
  // `actor` must be the model given to the constructor.
  WeightSyncStats sync(models::LanguageModel& actor) override;
  // Ends the workers' serve() (collective with it); after the last step, once.
  void finish();

 private:
  models::LanguageModel& actor_;
  RolloutGroups groups_;
  WeightBroadcastOptions options_;
  WeightSender sender_;
};

// A rollout worker's side.
class RolloutWorker {
 public:
  // The handshake and the first sync (see RemoteRollout).
  RolloutWorker(models::LanguageModel& model, const RolloutGroups& groups, const WeightBroadcastOptions& options = {});
  // Answers the trainer's requests (responses to prompts, the weights to receive) until the
  // trainer's finish(); returns the number of requests served. Throws what failed on this worker (the trainer
  // ranks throw it too) or when the trainer could not be reached.
  int64_t serve();

 private:
  // This worker's responses to its share of the trainer ranks' requests (one per rank).
  Prompts respond(const std::vector<Prompts>& requests);

  models::LanguageModel& model_;
  RolloutGroups groups_;
  WeightBroadcastOptions options_;
  WeightReceiver receiver_;
};

}  // namespace megacpp::rl
