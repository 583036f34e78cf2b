#include "rl/remote_rollout.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "parallel/object_collectives.h"

namespace megacpp::rl {
namespace {

enum Command : int64_t { kStop = 0, kGenerate = 1, kSync = 2 };

int64_t bits_of(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
double double_of(int64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// What a trainer rank sends: a header, the stop tokens, then its prompts.
Prompts request(Command command, const Prompts& prompts, int64_t responses_per_prompt, const inference::Sampling& s) {
  Prompts lists{{command, responses_per_prompt, static_cast<int64_t>(s.seed), bits_of(s.temperature), s.top_k, bits_of(s.top_p),
                 s.max_new_tokens, s.max_length, s.vocabulary, s.kv_cache ? 1 : 0},
                s.stop};
  lists.insert(lists.end(), prompts.begin(), prompts.end());
  return lists;
}

inference::Sampling sampling_of(const Prompts& request) {
  const std::vector<int64_t>& h = request.at(0);
  inference::Sampling s;
  s.seed = static_cast<uint64_t>(h.at(2));
  s.temperature = double_of(h.at(3));
  s.top_k = h.at(4);
  s.top_p = double_of(h.at(5));
  s.max_new_tokens = h.at(6);
  s.max_length = h.at(7);
  s.vocabulary = h.at(8);
  s.kv_cache = h.at(9) != 0;
  s.stop = request.at(1);
  return s;
}
constexpr size_t kPromptsFrom = 2;  // a request's lists before its prompts

// Every rank learns of a worker's failure ("" on ranks that did not fail).
void raise_failures(const RolloutGroups& groups, const std::string& mine, const c10::Device& device) {
  const std::vector<std::string> errors = parallel::all_gather_texts(groups.all, mine, device);
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r].empty()) throw std::runtime_error("rollout worker rank " + std::to_string(r) + " failed: " + errors[r]);
  }
}

}  // namespace

RemoteRollout::RemoteRollout(models::LanguageModel& actor, const RolloutGroups& groups, const WeightBroadcastOptions& options)
    : actor_(actor), groups_(groups), options_(options), sender_(actor, groups, options) {
  sender_.send();
}

std::vector<inference::Generation> RemoteRollout::generate(const Prompts& prompts, int64_t responses_per_prompt,
                                                           const inference::Sampling& sampling) {
  const auto requests = parallel::all_gather_token_lists(groups_.all, request(kGenerate, prompts, responses_per_prompt, sampling), options_.device);
  raise_failures(groups_, "", options_.device);
  const auto answers = parallel::all_gather_token_lists(groups_.all, {}, options_.device);
  int64_t first = 0;  // this rank's first prompt among the step's
  for (int r = 0; r < groups_.trainers.rank; ++r) first += static_cast<int64_t>(requests[r].size() - kPromptsFrom);
  const int workers = groups_.workers.size(), first_worker = groups_.workers.global_ranks.front();
  std::vector<inference::Generation> responses;
  for (int64_t i = 0; i < static_cast<int64_t>(prompts.size()); ++i) {
    const int64_t j = first + i;
    const Prompts& answer = answers.at(first_worker + j % workers);
    for (int64_t k = 0; k < responses_per_prompt; ++k) {
      inference::Generation g;
      g.tokens = answer.at((j / workers) * responses_per_prompt + k);
      g.stopped = !g.tokens.empty() && std::find(sampling.stop.begin(), sampling.stop.end(), g.tokens.back()) != sampling.stop.end();
      responses.push_back(std::move(g));
    }
  }
  return responses;
}

WeightSyncStats RemoteRollout::sync(models::LanguageModel& actor) {
  if (&actor != &actor_) throw std::invalid_argument("remote rollout: sync() of another model than the one the workers were handshaken with");
  parallel::all_gather_token_lists(groups_.all, request(kSync, {}, 0, {}), options_.device);
  return sender_.send();
}

void RemoteRollout::finish() { parallel::all_gather_token_lists(groups_.all, request(kStop, {}, 0, {}), options_.device); }

RolloutWorker::RolloutWorker(models::LanguageModel& model, const RolloutGroups& groups, const WeightBroadcastOptions& options)
    : model_(model), groups_(groups), options_(options), receiver_(model, groups, options) {
  receiver_.receive();
}

int64_t RolloutWorker::serve() {
  for (int64_t requests_served = 0;; ++requests_served) {
    const auto requests = parallel::all_gather_token_lists(groups_.all, {}, options_.device);
    const int64_t command = requests.at(0).at(0).at(0);
    if (command == kStop) return requests_served;
    if (command == kSync) {
      const WeightSyncStats synced = receiver_.receive();
      spdlog::debug("rollout worker {}: weights synced in {:.3f} s ({} bytes)", groups_.all.rank, synced.seconds, synced.bytes);
      continue;
    }
    Prompts answer;
    std::string error;
    try {
      answer = respond(requests);
    } catch (const std::exception& e) {
      error = e.what();
    }
    raise_failures(groups_, error, options_.device);
    parallel::all_gather_token_lists(groups_.all, answer, options_.device);
  }
}

Prompts RolloutWorker::respond(const std::vector<Prompts>& requests) {
  const int workers = groups_.workers.size(), me = groups_.workers.rank;
  const int64_t responses_per_prompt = requests.at(0).at(0).at(1);
  inference::Sampling sampling = sampling_of(requests.at(0));
  sampling.seed += static_cast<uint64_t>(me);
  Prompts mine;
  int64_t j = 0;
  for (int r = 0; r < groups_.trainers.size(); ++r) {
    for (size_t p = kPromptsFrom; p < requests[r].size(); ++p, ++j) {
      if (j % workers != me) continue;
      const auto length = static_cast<int64_t>(requests[r][p].size());
      if (sampling.max_length > 0 && length >= sampling.max_length) {
        throw std::invalid_argument("prompt " + std::to_string(p - kPromptsFrom) + " of trainer rank " + std::to_string(r) + " has " +
                                    std::to_string(length) + " tokens: the context of " + std::to_string(sampling.max_length) +
                                    " leaves no room to generate");
      }
      mine.push_back(requests[r][p]);
    }
  }
  Prompts answer;
  if (mine.empty()) return answer;
  for (auto& g : inference::generate(model_, repeat_each(mine, responses_per_prompt), sampling)) answer.push_back(std::move(g.tokens));
  return answer;
}

}  // namespace megacpp::rl
