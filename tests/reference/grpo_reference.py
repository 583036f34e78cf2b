#!/usr/bin/env python3
"""GRPO's advantages, PPO's dual-clipped policy loss and the KL estimators in NumPy, written from
verl's core_algos.py (compute_grpo_outcome_advantage, compute_policy_loss, kl_penalty,
agg_loss, whose sequence means count the responses with a token in the mask, as ROLL's); shares
no code with megacpp.

Reads a JSON object on stdin: scores [n], groups [n], log_probs / old_log_probs / ref_log_probs /
mask [n][t], clip_low, clip_high, dual_clip, epsilon. Prints a JSON object: advantages (with and
without dividing by the standard deviation), the policy loss under each aggregation, clip_fraction,
approx_kl, the token-mean loss without the dual clip, the seq-mean-token-mean loss and clip fraction
with ROLL's sequence-level ratio (importance_sampling "seq"), and each KL estimator's per-token values and
token-mean.
"""
import json
import sys

import numpy as np


def grpo_advantages(scores, groups, divide_by_std, epsilon):
    out = np.zeros_like(scores)
    for g in set(groups):
        rows = [i for i, x in enumerate(groups) if x == g]
        values = scores[rows]
        mean, std = (0.0, 1.0) if len(rows) == 1 else (values.mean(), values.std(ddof=1))
        out[rows] = (values - mean) / (std + epsilon) if divide_by_std else values - mean
    return out


def agg(loss, mask, mode):
    if mode == "token-mean":
        return (loss * mask).sum() / mask.sum()
    sums, tokens = (loss * mask).sum(-1), mask.sum(-1)
    valid = tokens > 0
    per_response = sums if mode == "seq-mean-token-sum" else sums / np.maximum(tokens, 1)
    return per_response[valid].sum() / valid.sum()


def policy_loss(lp, old, adv, mask, clip_low, clip_high, dual_clip, mode, sequence_ratio=False):
    neg_kl = np.clip(lp - old, -20, 20)
    ratio = np.exp(neg_kl)
    if sequence_ratio:  # ROLL's importance_sampling "seq": each response's mean log-ratio
        tokens = mask.sum(-1, keepdims=True)
        mean = np.where(tokens > 0, (neg_kl * mask).sum(-1, keepdims=True) / np.maximum(tokens, 1), 0.0)
        ratio = np.broadcast_to(np.exp(mean), neg_kl.shape)
    l1 = -adv * ratio
    l2 = -adv * np.clip(ratio, 1 - clip_low, 1 + clip_high)
    clip1 = np.maximum(l1, l2)
    if dual_clip:
        losses = np.where(adv < 0, np.minimum(-adv * dual_clip, clip1), clip1)
    else:
        losses = clip1
    frac = ((l2 > l1) * mask).sum() / mask.sum()
    return agg(losses, mask, mode), frac, (-neg_kl * mask).sum() / mask.sum()


def kl(lp, ref, name):
    k1 = lp - ref
    if name == "kl":
        return k1
    if name == "abs":
        return np.abs(k1)
    if name == "mse":
        return 0.5 * k1 ** 2
    r = np.clip(ref - lp, -20, 20)
    return np.clip(np.exp(r) - r - 1, -10, 10)


def main():
    d = json.load(sys.stdin)
    scores, groups = np.array(d["scores"], dtype=np.float64), d["groups"]
    lp, old, ref, mask = (np.array(d[k], dtype=np.float64) for k in ("log_probs", "old_log_probs", "ref_log_probs", "mask"))
    adv = grpo_advantages(scores, groups, True, d["epsilon"])
    per_token = adv[:, None] * mask
    out = {"advantages": adv.tolist(), "advantages_no_std": grpo_advantages(scores, groups, False, d["epsilon"]).tolist()}
    for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean"):
        loss, frac, approx_kl = policy_loss(lp, old, per_token, mask, d["clip_low"], d["clip_high"], d["dual_clip"], mode)
        out["loss " + mode] = float(loss)
    out["clip_fraction"], out["approx_kl"] = float(frac), float(approx_kl)
    out["loss no dual clip"] = float(policy_loss(lp, old, per_token, mask, d["clip_low"], d["clip_high"], 0, "token-mean")[0])
    seq = policy_loss(lp, old, per_token, mask, d["clip_low"], d["clip_high"], d["dual_clip"], "seq-mean-token-mean", True)
    out["loss sequence ratio"], out["clip_fraction sequence ratio"] = float(seq[0]), float(seq[1])
    for name in ("kl", "abs", "mse", "low_var_kl"):
        values = kl(lp, ref, name)
        out["kl " + name] = values.tolist()
        out["kl mean " + name] = float(agg(values, mask, "token-mean"))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
