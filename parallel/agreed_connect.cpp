#include "parallel/agreed_connect.h"

#include <stdexcept>

#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/torch.h>

#include "megacpp/logging.h"
#include "parallel/store_values.h"

namespace megacpp::parallel {
namespace {

const std::string kConnected = "ok";

std::string outcome_key(const std::string& attempt_prefix, int member) {
  return "megacpp/agree/" + attempt_prefix + "/outcome_" + std::to_string(member);
}

// Every member's outcome of one attempt: "rank R: error" for each that failed, empty if none.
std::string failures_of_attempt(c10d::Store& store, const std::string& attempt_prefix, const Group& group,
                                const AgreedConnectOptions& options) {
  std::vector<std::string> keys;
  for (int i = 0; i < group.size(); ++i) keys.push_back(outcome_key(attempt_prefix, i));
  try {
    store.wait(keys, options.outcome_timeout);
  } catch (const std::exception&) {
    std::vector<int> silent;
    for (size_t i : absent_keys(store, keys)) silent.push_back(group.global_ranks[i]);
    throw std::runtime_error("connecting the group of ranks " + group.describe() + ": " +
                             (silent.empty() ? std::string("a member") : "rank(s) " + rank_list(silent)) + " did not report within " +
                             std::to_string(options.outcome_timeout.count()) + " ms (stopped or stalled?)");
  }
  std::string failures;
  for (int i = 0; i < group.size(); ++i) {
    const std::string outcome = store_text(store.get(keys[i]));
    if (outcome != kConnected) failures += (failures.empty() ? "" : "; ") + ("rank " + std::to_string(group.global_ranks[i]) + ": " + outcome);
  }
  return failures;
}

// Every member adds a one at its own index: anything but all ones means a contribution went
// astray.
void check_every_member_arrives(compat::CommBackend& backend, const Group& group, const AgreedConnectOptions& options) {
  at::Tensor presence = torch::zeros({group.size()}, torch::TensorOptions(torch::kFloat).device(options.device));
  presence.narrow(0, group.rank, 1).fill_(1);
  std::vector<at::Tensor> tensors{presence};
  backend.allreduce(tensors)->wait();
  const at::Tensor arrived = presence.cpu();
  std::vector<int> missing;
  for (int i = 0; i < group.size(); ++i) {
    if (arrived[i].item<float>() != 1.0f) missing.push_back(group.global_ranks[i]);
  }
  if (!missing.empty()) throw std::runtime_error("the check all-reduce got nothing from rank(s) " + rank_list(missing));
}

}  // namespace

c10::intrusive_ptr<compat::CommBackend> connect_agreed(c10d::Store& store, const std::string& prefix,
                                                       const Group& group, const ConnectBackend& connect,
                                                       const AgreedConnectOptions& options) {
  std::string failures;
  for (int attempt = 1; attempt <= options.attempts; ++attempt) {
    const std::string attempt_prefix = attempt == 1 ? prefix : prefix + "_attempt_" + std::to_string(attempt);
    c10::intrusive_ptr<compat::CommBackend> backend;
    std::string outcome = kConnected;
    try {
      backend = connect(attempt_prefix);
      if (backend) check_every_member_arrives(*backend, group, options);
    } catch (const std::exception& e) {
      outcome = error_message(e);
      if (outcome.empty() || outcome == kConnected) outcome = "failed without a message";
    }
    store.set(outcome_key(attempt_prefix, group.rank), store_bytes(outcome));
    failures = failures_of_attempt(store, attempt_prefix, group, options);
    if (failures.empty()) return backend;
    if (attempt < options.attempts && group.rank == 0) {  // once per group
      spdlog::warn("connecting the group of ranks {} failed (attempt {} of {}), connecting again: {}", group.describe(),
                   attempt, options.attempts, failures);
    }
  }
  throw std::runtime_error("connecting the group of ranks " + group.describe() + " failed " +
                           std::to_string(options.attempts) + " times; the last time: " + failures);
}

}  // namespace megacpp::parallel
