// ROLL's PPO / RLVR algorithm keys (roll/configs/base_config.py PPOConfig, roll/pipeline/rlvr/
// rlvr_config.py RLVRConfig) as megacpp-grpo's flags (rl/objective_options.h), with ROLL's
// defaults where megacpp-grpo's differ (taken unless the command line gives the flag): no KL
// loss unless use_kl_loss with kl_loss_coef, no dual clip unless dual_clip_loss (then
// 1 + 2 x pg_clip, as ROLL's actor worker), loss_agg_mode seq-mean-token-mean.
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "settings/rlvr_reader.h"

namespace megacpp::settings::rlvr {
namespace {

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

bool Reader::boolean(const YAML::Node& node, const std::string& key) const {
  const std::string value = text(node, key);
  if (value == "true" || value == "True") return true;
  if (value == "false" || value == "False") return false;
  fail(node, key, "expected true or false, got '" + value + "'");
}

bool Reader::algorithm_key(const YAML::Node& key_node, const std::string& key, const YAML::Node& v) {
  static const std::map<std::string, std::string> values = {
      {"ppo_epochs", "ppo-epochs"},       {"kl_loss_type", "kl-loss-type"},     {"loss_agg_mode", "loss-agg-mode"},
      {"adv_estimator", "adv-estimator"}, {"entropy_loss_coef", "entropy-coeff"}, {"importance_sampling", "importance-sampling"}};
  static const std::map<std::string, std::string> switches = {{"whiten_advantages", "whiten-advantages"}, {"max_len_mask", "max-len-mask"},
                                                               {"difficulty_mask", "difficulty-mask"}, {"error_max_len_clip", "error-max-len-clip"}};
  static const std::map<std::string, std::string> clips = {{"reward_clip", "reward-clip"}, {"advantage_clip", "advantage-clip"}};
  // Read by finish_algorithm(), where each is combined with the keys it goes with.
  static const std::set<std::string> combined = {"pg_clip", "use_pg_clip_range", "pg_clip_low", "pg_clip_high", "dual_clip_loss",
                                                 "use_kl_loss", "kl_loss_coef", "difficulty_low_threshold", "difficulty_high_threshold",
                                                 "error_max_len_threshold", "norm_mean_type", "norm_std_type"};
  // Settings megacpp-grpo has one way of: the value that way means, and why.
  static const std::map<std::string, std::pair<std::string, std::string>> fixed = {
      {"add_token_level_kl", {"false", "the KL is a loss term (use_kl_loss, kl_loss_coef), not part of the reward"}},
      {"whiten_rewards", {"false", "the rewards are normalized by norm_mean_type / norm_std_type, not whitened per token"}},
      {"difficulty_loss_weight", {"false", "responses are not weighted by a dataset's difficulty"}},
      {"length_loss_weight", {"false", "responses are not weighted by their lengths"}}};
  if (const auto found = values.find(key); found != values.end()) {
    flag(v, key, found->second);
  } else if (const auto found = switches.find(key); found != switches.end()) {
    if (boolean(v, key)) flag(v, key, found->second, "");
  } else if (const auto found = clips.find(key); found != clips.end()) {
    if (!v.IsNull()) flag(v, key, found->second);
  } else if (const auto found = fixed.find(key); found != fixed.end()) {
    require(v, key, found->second.first, found->second.second);
  } else if (key == "gamma") {
    if (std::stod(text(v, key)) != 1) fail(v, key, "must be 1 (the outcome reward is the advantage of each of the response's tokens)");
  } else if (key == "value_clip" || key == "lambd") {
    if (!v.IsNull()) std::stod(text(v, key));  // a number, for the critic and GAE, which GRPO and REINFORCE have none of (as in ROLL)
  } else {
    return combined.count(key) > 0;
  }
  return true;
}

void Reader::finish_algorithm() {
  auto given = [&](const char* key) { return root[key].IsDefined() && !root[key].IsNull(); };
  auto on = [&](const char* key) { return given(key) && boolean(root[key], key); };
  double clip = 0.2;
  if (given("pg_clip")) {
    flag(root["pg_clip"], "pg_clip", "clip-ratio");
    clip = std::stod(text(root["pg_clip"], "pg_clip"));
  }
  if (on("use_pg_clip_range")) {
    for (const auto& [key, name] : {std::pair{"pg_clip_low", "clip-ratio-low"}, std::pair{"pg_clip_high", "clip-ratio-high"}}) {
      flag(given(key) ? root[key] : root, key, name, given(key) ? text(root[key], key) : "0.2");
    }
  }
  if (given("dual_clip_loss")) {
    flag(root["dual_clip_loss"], "dual_clip_loss", "dual-clip-ratio", on("dual_clip_loss") ? number_text(1 + 2 * clip) : "0");
  } else {
    default_flag("dual-clip-ratio", "0");
  }
  if (!given("loss_agg_mode")) default_flag("loss-agg-mode", "seq-mean-token-mean");
  if (!given("use_kl_loss")) {
    default_flag("kl-coef", "0");
  } else if (!on("use_kl_loss")) {
    flag(root["use_kl_loss"], "use_kl_loss", "kl-coef", "0");
  } else if (given("kl_loss_coef")) {
    flag(root["kl_loss_coef"], "kl_loss_coef", "kl-coef");
  } else {
    default_flag("kl-coef", "0");
  }
  if (on("difficulty_mask")) {  // the thresholds count with their mask only, as in ROLL
    if (given("difficulty_low_threshold")) flag(root["difficulty_low_threshold"], "difficulty_low_threshold", "difficulty-low-threshold");
    if (given("difficulty_high_threshold")) flag(root["difficulty_high_threshold"], "difficulty_high_threshold", "difficulty-high-threshold");
  }
  if (on("error_max_len_clip") && given("error_max_len_threshold")) {
    flag(root["error_max_len_threshold"], "error_max_len_threshold", "error-max-len-threshold");
  }
  if (!given("adv_estimator")) fail(root, "adv_estimator", "not given: ROLL's default is gae, which trains a critic; give grpo or reinforce");
  const std::string estimator = text(root["adv_estimator"], "adv_estimator");
  if (estimator != "grpo" && estimator != "reinforce") {
    fail(root["adv_estimator"], "adv_estimator", "megacpp-grpo has grpo and reinforce, got '" + estimator + "' (gae trains a critic)");
  }
  for (const char* key : {"norm_mean_type", "norm_std_type"}) {
    const std::string value = given(key) ? text(root[key], key) : "none";
    if (value != "none" && value != "batch" && value != "group") {
      fail(root[key], key, "expected null, batch or group, got '" + value + "' (running statistics across steps are not kept)");
    }
    if (estimator == "grpo" && value != "none" && value != "group") {
      fail(root[key], key, "adv_estimator grpo normalizes within each prompt's group (ROLL sets this to group); use reinforce for " + value);
    }
    if (estimator == "reinforce") flag(given(key) ? root[key] : root, key, key == std::string("norm_mean_type") ? "norm-mean-type" : "norm-std-type", value);
  }
}

}  // namespace megacpp::settings::rlvr
