#!/usr/bin/env python3
"""An independent forward pass of Hugging Face's LlamaForCausalLM, written in NumPy (float64).

Usage: llama_reference.py DIR
DIR holds config.json (HF names: hidden_size, intermediate_size, num_hidden_layers,
num_attention_heads, num_key_value_heads, rms_norm_eps, rope_theta, vocab_size,
tie_word_embeddings), tensors.json ({name: shape}) and one raw little-endian float32 file per
tensor (NAME.f32) with HF weight names, plus input_ids.i64 [batch, seq] and logits.f32
[batch, seq, vocab] computed by megacpp. Exits 0 when the logits agree within 1e-4.
"""
import json
import os
import sys

import numpy as np


def load(directory):
    shapes = json.load(open(os.path.join(directory, "tensors.json")))
    return {name: np.fromfile(os.path.join(directory, name + ".f32"), dtype="<f4").astype(np.float64).reshape(shape)
            for name, shape in shapes.items()}


def rms_norm(x, weight, eps):
    return weight * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def forward(cfg, w, ids):
    batch, seq = ids.shape
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg["hidden_size"] // heads
    inv_freq = 1.0 / (cfg["rope_theta"] ** (np.arange(0, head_dim, 2) / head_dim))
    freqs = np.outer(np.arange(seq), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb), np.sin(emb)
    mask = np.triu(np.full((seq, seq), -np.inf), 1)
    h = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = rms_norm(h, w[p + "input_layernorm.weight"], cfg["rms_norm_eps"])
        def proj(name, n):
            return (x @ w[p + f"self_attn.{name}.weight"].T).reshape(batch, seq, n, head_dim).transpose(0, 2, 1, 3)
        q, k, v = proj("q_proj", heads), proj("k_proj", kv_heads), proj("v_proj", kv_heads)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = np.repeat(k, heads // kv_heads, axis=1), np.repeat(v, heads // kv_heads, axis=1)
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim) + mask
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        attn = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, heads * head_dim)
        h = h + attn @ w[p + "self_attn.o_proj.weight"].T
        x = rms_norm(h, w[p + "post_attention_layernorm.weight"], cfg["rms_norm_eps"])
        gate, up = x @ w[p + "mlp.gate_proj.weight"].T, x @ w[p + "mlp.up_proj.weight"].T
        h = h + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    h = rms_norm(h, w["model.norm.weight"], cfg["rms_norm_eps"])
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return h @ head.T


def main(directory):
    cfg = json.load(open(os.path.join(directory, "config.json")))
    weights = load(directory)
    ids = np.fromfile(os.path.join(directory, "input_ids.i64"), dtype="<i8").reshape(cfg["batch"], cfg["seq"])
    expected = forward(cfg, weights, ids)
    got = np.fromfile(os.path.join(directory, "logits.f32"), dtype="<f4").reshape(expected.shape)
    diff = np.abs(got - expected).max()
    print(f"max |megacpp - reference| = {diff:.3e} over logits of shape {expected.shape}")
    return 0 if diff <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
