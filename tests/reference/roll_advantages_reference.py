#!/usr/bin/env python3
"""ROLL's RLVR reward post-processing in NumPy, written from roll/utils/functionals.py
(get_sample_level_mask, difficulty_mask, reward_norm, reward_postprocess, expand_to_token_level,
compute_reinforce_return, masked_whiten, compute_advantage); shares no code with megacpp.

Reads a JSON object on stdin: scores [n] (a group's n_sample responses consecutive), n_sample,
lengths [n] (each response's tokens), max_response_length, tokens (the width of the token
tensors) and ROLL's pipeline keys: adv_estimator, norm_mean_type, norm_std_type (null or a name),
reward_clip, advantage_clip (null or a number), whiten_advantages, max_len_mask, difficulty_mask,
difficulty_low_threshold, difficulty_high_threshold, error_max_len_clip, error_max_len_threshold.
Prints a JSON object: advantages [n][tokens] and final_response_mask [n][tokens].
"""
import json
import sys

import numpy as np


def masked_mean(x, mask):
    return (x * mask).sum() / (mask.sum() + 1e-8)


def masked_whiten(values, mask):
    mean = masked_mean(values, mask)
    var = masked_mean((values - mean) ** 2, mask)
    count = mask.sum()
    var = var * count / (count - 1)
    return (values - mean) / np.sqrt(var + 1e-8)


def sample_mask(d, scores, lengths):
    keep = np.ones(len(scores))
    if d["max_len_mask"]:
        keep *= (lengths != d["max_response_length"]).astype(float)
    if d["difficulty_mask"]:
        group_mean = scores.reshape(-1, d["n_sample"]).mean(-1, keepdims=True)
        group_mean = np.broadcast_to(group_mean, (len(scores) // d["n_sample"], d["n_sample"])).reshape(-1)
        keep *= ((group_mean > d["difficulty_low_threshold"]) & (group_mean < d["difficulty_high_threshold"])).astype(float)
    if d["error_max_len_clip"]:
        keep *= (((scores == 0) & (lengths < d["error_max_len_threshold"])) | (scores == 1)).astype(float)
    return keep


def reward_norm(rewards, n_sample, mean_type, std_type):
    grouped = rewards.reshape(-1, n_sample)
    if mean_type == "batch":
        mean = rewards.mean()
    elif mean_type == "group":
        mean = grouped.mean(-1, keepdims=True)
    else:
        mean = 0.0
    if std_type == "batch":
        std = rewards.std(ddof=1)
    elif std_type == "group":
        std = grouped.std(-1, ddof=1, keepdims=True)
    base = grouped if mean_type == "group" else rewards
    out = (base - mean) / (std + 1e-6) if std_type is not None else base - mean
    return out.reshape(-1)


def main():
    d = json.load(sys.stdin)
    scores, lengths = np.array(d["scores"], dtype=np.float64), np.array(d["lengths"])
    n, t = len(scores), d["tokens"]
    response_mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float64)
    final_mask = response_mask * sample_mask(d, scores, lengths)[:, None]

    mean_type, std_type = d["norm_mean_type"], d["norm_std_type"]
    if d["adv_estimator"] == "grpo":
        mean_type, std_type = "group", "group"
    rewards = reward_norm(scores, d["n_sample"], mean_type, std_type)
    if d["reward_clip"]:
        rewards = np.clip(rewards, -d["reward_clip"], d["reward_clip"])

    token_rewards = np.zeros((n, t))
    token_rewards[np.arange(n), lengths - 1] = rewards  # the outcome on the last response token
    if d["reward_clip"]:
        token_rewards = np.clip(token_rewards, -d["reward_clip"], d["reward_clip"])
    token_rewards = token_rewards * final_mask
    advantages = np.flip(np.cumsum(np.flip(token_rewards, 1), 1), 1)  # REINFORCE's return, gamma 1
    if d["whiten_advantages"] and final_mask.sum() > 0:
        advantages = masked_whiten(advantages, final_mask)
    advantages = advantages * final_mask
    if d["advantage_clip"] is not None:
        advantages = np.clip(advantages, -d["advantage_clip"], d["advantage_clip"])
    json.dump({"advantages": advantages.tolist(), "final_response_mask": final_mask.tolist()}, sys.stdout)


if __name__ == "__main__":
    main()
