#include "rl/grpo_step.h"

#include <stdexcept>
#include <string>

#include <ATen/ceil_div.h>
#include <torch/torch.h>

#include "inference/sequence_log_probs.h"
#include "models/lora.h"
#include "parallel/collectives.h"
#include "training/optim/optimizer.h"

namespace megacpp::rl {
namespace {

struct Rollouts {
  std::vector<std::vector<int64_t>> prompts;  // each prompt once per response
  std::vector<inference::Generation> responses;
  std::vector<int64_t> groups;  // the prompt each response answers
};

Rollouts sample(RolloutEngine& rollout, const std::vector<std::vector<int64_t>>& prompts, const GrpoSettings& s) {
  Rollouts r;
  r.prompts = repeat_each(prompts, s.responses_per_prompt);
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int64_t k = 0; k < s.responses_per_prompt; ++k) r.groups.push_back(static_cast<int64_t>(p));
  }
  r.responses = rollout.generate(prompts, s.responses_per_prompt, s.sampling);
  return r;
}

ResponseOutcomes outcomes_of(const Rollouts& r, const RewardFunction& reward, const GrpoSettings& s) {
  ResponseOutcomes o;
  std::vector<double> scores;
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < r.responses.size(); ++i) {
    try {
      scores.push_back(reward(r.prompts[i], r.responses[i].tokens));
    } catch (const std::exception& e) {
      throw std::runtime_error("the reward function failed on prompt " + std::to_string(r.groups[i]) + " of this rank: " + e.what());
    }
    lengths.push_back(static_cast<int64_t>(r.responses[i].tokens.size()));
  }
  o.scores = torch::tensor(scores, torch::kDouble);
  o.groups = r.groups;
  o.lengths = torch::tensor(lengths, torch::kLong);
  o.max_new_tokens = s.sampling.max_new_tokens;
  return o;
}

// Sums over the batch: every rank's, a tensor-parallel or Ulysses group's responses counted once
// (by its first rank).
SumOverBatch batch_sum(const parallel::DeviceMesh& mesh, const parallel::Group& world, c10::Device device) {
  return [&mesh, &world, device](const at::Tensor& mine) {
    at::Tensor total = (first_of_model_parallel_group(mesh) ? mine : torch::zeros_like(mine)).to(device);
    parallel::all_reduce(world, total, parallel::ReduceOp::kSum).wait();
    return total.to(torch::kCPU);
  };
}

// Prompt and response of each, right-padded (the L - 1 positions scored a multiple of
// `multiple`), and where the response's tokens are scored.
RolloutBatch batch_of(const Rollouts& r, int64_t multiple, at::Tensor& lengths) {
  const auto n = static_cast<int64_t>(r.responses.size());
  int64_t longest = 0;
  for (int64_t i = 0; i < n; ++i) longest = std::max<int64_t>(longest, r.prompts[i].size() + r.responses[i].tokens.size());
  longest = 1 + at::round_up(longest - 1, multiple);
  RolloutBatch b;
  b.ids = torch::zeros({n, longest}, torch::kLong);
  b.response_mask = torch::zeros({n, longest - 1});
  lengths = torch::empty({n}, torch::kLong);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> row = r.prompts[i];
    row.insert(row.end(), r.responses[i].tokens.begin(), r.responses[i].tokens.end());
    const auto length = static_cast<int64_t>(row.size()), prompt = static_cast<int64_t>(r.prompts[i].size());
    b.ids[i].narrow(0, 0, length).copy_(torch::tensor(row, torch::kLong));
    b.response_mask[i].narrow(0, prompt - 1, length - prompt).fill_(1);  // position t scores token t + 1
    lengths[i] = length;
  }
  return b;
}

// Rows [first, first + count) of each of the batch's tensors.
RolloutBatch rows_of(const RolloutBatch& b, int64_t first, int64_t count) {
  auto rows = [&](const at::Tensor& t) { return t.defined() ? t.narrow(0, first, count) : t; };
  return {rows(b.ids), rows(b.response_mask), rows(b.advantages), rows(b.old_log_probs), rows(b.ref_log_probs)};
}

// verl's update_policy: for each of `epochs` passes, one optimizer step per mini-batch of the
// batch's rows in order (the gradients that TP leaves partial summed, all clipped together).
// Returns the statistics averaged over the updates.
ActorUpdateStats update_actor(models::LanguageModel& actor, torch::optim::Optimizer& optimizer, const RolloutBatch& batch,
                              const GrpoSettings& s, const parallel::DeviceMesh& mesh) {
  const int64_t n = batch.ids.size(0), mini = s.mini_batch_size > 0 ? s.mini_batch_size : n;
  if (n % mini != 0 || s.epochs <= 0) {
    throw std::invalid_argument("grpo: " + std::to_string(n) + " responses on this rank do not split into mini-batches of " +
                                std::to_string(mini) + ", or " + std::to_string(s.epochs) + " epochs");
  }
  std::vector<at::Tensor> params;
  for (const auto& group : optimizer.param_groups()) params.insert(params.end(), group.params().begin(), group.params().end());
  ActorUpdateStats mean;
  const double updates = static_cast<double>(s.epochs * (n / mini));
  for (int64_t epoch = 0; epoch < s.epochs; ++epoch) {
    for (int64_t first = 0; first < n; first += mini) {
      optimizer.zero_grad();
      const ActorUpdateStats one = actor_backward(actor, rows_of(batch, first, mini), s.update);
      const double norm = training::optim::finish_gradients(params, mesh, s.update.device).total;
      if (s.before_step) s.before_step();
      training::optim::clip_and_step(optimizer, params, s.clip_grad, norm);
      mean.policy_loss += one.policy_loss / updates;
      mean.kl += one.kl / updates;
      mean.clip_fraction += one.clip_fraction / updates;
      mean.approx_kl += one.approx_kl / updates;
      mean.entropy += one.entropy / updates;
    }
  }
  return mean;
}

}  // namespace

GrpoStepStats grpo_step(models::LanguageModel& actor, torch::optim::Optimizer& optimizer, RolloutEngine& rollout,
                        models::LanguageModel* reference, const std::vector<std::vector<int64_t>>& prompts,
                        const RewardFunction& reward, const GrpoSettings& s, const parallel::DeviceMesh& mesh,
                        const parallel::Group& world) {
  if (prompts.empty() || s.responses_per_prompt <= 0) throw std::invalid_argument("grpo: no prompts or no responses per prompt");
  if (reference) {
    try {
      check_same_model(actor, "actor", *reference, "reference");
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("grpo: the reference is not the actor's model: ") + e.what());
    }
  }
  const Rollouts rollouts = sample(rollout, prompts, s);
  at::Tensor lengths;
  RolloutBatch batch = batch_of(rollouts, s.position_multiple, lengths);
  const ResponseOutcomes outcomes = outcomes_of(rollouts, reward, s);
  const ShapedAdvantages shaped = shape_advantages(outcomes, s.shaping, batch_sum(mesh, world, s.update.device));
  batch.advantages = shaped.advantages;
  batch.response_mask.mul_(shaped.kept.unsqueeze(1));
  GrpoStepStats stats;
  stats.kept = shaped.kept_responses / shaped.responses;
  stats.skipped = shaped.kept_responses == 0;
  if (!stats.skipped) {
    inference::SequenceScoring scoring{s.infer_batch_size, s.update.temperature, /*with_entropy=*/false, 1024,
                                       s.update.device, world, mesh.cp(), s.position_multiple};
    batch.old_log_probs = inference::sequence_log_probs(actor, batch.ids, lengths, scoring).log_probs;  // collective
    if (reference) {
      batch.ref_log_probs = inference::sequence_log_probs(*reference, batch.ids, lengths, scoring).log_probs;
    } else if (s.reference_is_actor_base) {
      const models::AdaptersDisabled base(actor);
      batch.ref_log_probs = inference::sequence_log_probs(actor, batch.ids, lengths, scoring).log_probs;
    }
    stats.update = update_actor(actor, optimizer, batch, s, mesh);
    stats.sync = rollout.sync(actor);
  }
  double generated = 0;
  for (const auto& g : rollouts.responses) generated += static_cast<double>(g.tokens.size());
  // The statistics averaged over the ranks in one all-reduce.
  at::Tensor figures = torch::tensor({outcomes.scores.mean().item<double>(), generated / static_cast<double>(rollouts.responses.size()),
                                      stats.update.policy_loss, stats.update.kl, stats.update.clip_fraction, stats.update.approx_kl,
                                      stats.update.entropy},
                                     torch::kDouble).to(s.update.device);
  parallel::all_reduce(world, figures, parallel::ReduceOp::kAvg).wait();
  figures = figures.to(torch::kCPU);
  const double* f = figures.data_ptr<double>();
  stats.reward = f[0];
  stats.response_length = f[1];
  stats.update = {f[2], f[3], f[4], f[5], f[6]};
  return stats;
}

}  // namespace megacpp::rl
