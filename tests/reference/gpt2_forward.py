#!/usr/bin/env python3
"""An independent forward pass of Hugging Face's GPT2LMHeadModel in NumPy.

Reads a Hugging Face GPT-2 folder (config.json, safetensors; the files are parsed by
hf_forward.read_weights) and writes the logits for token ids. The math is transformers'
modeling_gpt2.py, eager attention, with Conv1D weights stored [in, out] (y = x W + b):

  h = wte[ids] + wpe[0..s-1]
  per block:  a = LayerNorm(h; ln_1);  q, k, v = split(a c_attn.W + c_attn.b) into n_head heads
              h += merge(softmax(q k^T / sqrt(head_dim) + causal mask) v) c_proj.W + c_proj.b
              m = LayerNorm(h; ln_2);  h += act(m c_fc.W + c_fc.b) mlp.c_proj.W + mlp.c_proj.b
  logits = LayerNorm(h; ln_f) wte^T      (lm_head tied to wte)
act is config.json's activation_function: transformers' ACT2FN "gelu_new" and "gelu_pytorch_tanh"
are 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), "gelu" is the exact 0.5 x (1 + erf(x / sqrt(2))).
LayerNorm uses the biased variance and layer_norm_epsilon. Arithmetic in float64.

Usage: gpt2_forward.py HF_DIR --tokens 1,2,3 [--tokens ...] --out FILE (raw little-endian float32).
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_forward import read_weights  # noqa: E402  (file parsing only; the math is below)


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))


ACTIVATIONS = {"gelu_new": gelu_new, "gelu_pytorch_tanh": gelu_new, "gelu": gelu}


def forward(cfg, weights, ids):
    def w(name):
        return weights["transformer." + name].astype(np.float64)

    act = ACTIVATIONS.get(cfg.get("activation_function", "gelu_new"))
    if act is None or not cfg.get("scale_attn_weights", True):
        raise ValueError("only gelu, gelu_new, gelu_pytorch_tanh and scaled attention are implemented here")
    batch, seq = ids.shape
    heads, eps = cfg["n_head"], cfg.get("layer_norm_epsilon", 1e-5)
    dim = cfg["n_embd"]
    d = dim // heads
    mask = np.triu(np.full((seq, seq), -np.inf), 1)
    h = w("wte.weight")[ids] + w("wpe.weight")[np.arange(seq)]
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        a = layer_norm(h, w(p + "ln_1.weight"), w(p + "ln_1.bias"), eps)
        qkv = a @ w(p + "attn.c_attn.weight") + w(p + "attn.c_attn.bias")
        q, k, v = (t.reshape(batch, seq, heads, d).transpose(0, 2, 1, 3) for t in np.split(qkv, 3, axis=-1))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + mask
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        attn = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, dim)
        h = h + attn @ w(p + "attn.c_proj.weight") + w(p + "attn.c_proj.bias")
        m = layer_norm(h, w(p + "ln_2.weight"), w(p + "ln_2.bias"), eps)
        h = h + act(m @ w(p + "mlp.c_fc.weight") + w(p + "mlp.c_fc.bias")) @ w(p + "mlp.c_proj.weight") \
            + w(p + "mlp.c_proj.bias")
    h = layer_norm(h, w("ln_f.weight"), w("ln_f.bias"), eps)
    return h @ w("wte.weight").T


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("hf_dir")
    parser.add_argument("--tokens", action="append", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv[1:])
    with open(os.path.join(args.hf_dir, "config.json")) as f:
        cfg = json.load(f)
    ids = np.array([[int(t) for t in text.split(",")] for text in args.tokens], dtype=np.int64)
    forward(cfg, read_weights(args.hf_dir), ids).astype("<f4").tofile(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
