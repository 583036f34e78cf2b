#!/usr/bin/env python3
"""An independent forward pass of Hugging Face's LlavaForConditionalGeneration (CLIP vision tower) in NumPy.

Reads a LLaVA folder (config.json with vision_config and text_config, model.safetensors under the
names transformers saves: vision_tower.vision_model.*, multi_modal_projector.*, language_model.*)
and computes the logits for token ids and images given as pixel values (already processed). The
math is transformers' modeling_clip.py (CLIPVisionTransformer) and modeling_llava.py:

  CLIP: x = conv(pixels, patch_embedding, stride patch) -> [n, patches, D] (row-major patches)
        h = [class_embedding; x] + position_embedding[0..patches]; h = pre_layrnorm(h)
        hidden_states = (h, after layer 1, ..., after layer L); each layer (pre-LN):
        h = h + out_proj(attn(layer_norm1(h))), attn = softmax(q k^T / sqrt(d)) v, no mask;
        h = h + fc2(quick_gelu(fc1(layer_norm2(h)))), quick_gelu(x) = x * sigmoid(1.702 x)
  features = hidden_states[vision_feature_layer], [:, 1:] with strategy "default"
  projector: linear_2(gelu(linear_1(features))), gelu = 0.5 x (1 + erf(x / sqrt 2))
  inputs_embeds = embed_tokens[ids]; the positions where ids == image_token_index take the
  features in order (masked_scatter); logits = the text model (hf_forward.py) on inputs_embeds.
LayerNorm(x) = (x - mean) / sqrt(var + eps) * weight + bias (biased variance).

Usage: llava_forward.py DIR --tokens 1,2,3 [--tokens ...] --pixels FILE --images N [--out FILE]
FILE: raw little-endian float32 [N, channels, size, size] in C order. The logits [batch, seq,
vocab] go to --out as raw float32. Exit status 0 on success; otherwise the reason on stderr and 1.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_forward  # noqa: E402

erf = np.vectorize(math.erf)


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def clip_hidden_states(vcfg, w, pixels):
    d, p, heads, eps = vcfg["hidden_size"], vcfg["patch_size"], vcfg["num_attention_heads"], vcfg.get("layer_norm_eps", 1e-5)
    n, c, size, _ = pixels.shape
    g = size // p
    patches = pixels.reshape(n, c, g, p, g, p).transpose(0, 2, 4, 1, 3, 5).reshape(n, g * g, c * p * p)
    x = patches @ w("embeddings.patch_embedding.weight").reshape(d, c * p * p).T
    cls = np.broadcast_to(w("embeddings.class_embedding"), (n, 1, d))
    h = np.concatenate([cls, x], axis=1) + w("embeddings.position_embedding.weight")[: g * g + 1]
    h = layer_norm(h, w("pre_layrnorm.weight"), w("pre_layrnorm.bias"), eps)
    states = [h]
    for i in range(vcfg["num_hidden_layers"]):
        q_ = f"encoder.layers.{i}."

        def lin(x, name):
            return x @ w(q_ + name + ".weight").T + w(q_ + name + ".bias")

        x = layer_norm(h, w(q_ + "layer_norm1.weight"), w(q_ + "layer_norm1.bias"), eps)
        hd = d // heads

        def split(t):
            return t.reshape(n, -1, heads, hd).transpose(0, 2, 1, 3)

        q, k, v = split(lin(x, "self_attn.q_proj")), split(lin(x, "self_attn.k_proj")), split(lin(x, "self_attn.v_proj"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        h = h + lin((probs @ v).transpose(0, 2, 1, 3).reshape(n, -1, d), "self_attn.out_proj")
        x = lin(layer_norm(h, w(q_ + "layer_norm2.weight"), w(q_ + "layer_norm2.bias"), eps), "mlp.fc1")
        h = h + lin(x / (1.0 + np.exp(-1.702 * x)), "mlp.fc2")
        states.append(h)
    return states


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--tokens", action="append", required=True)
    parser.add_argument("--pixels", required=True)
    parser.add_argument("--images", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv[1:])
    try:
        path = os.path.join(args.directory, "config.json")
        with open(path) as f:
            cfg = json.load(f)
        if cfg.get("model_type") != "llava":
            raise hf_forward.ModelError(f"{path}: model_type {cfg.get('model_type')!r} is not llava")
        vcfg, tcfg = cfg["vision_config"], cfg["text_config"]
        if vcfg.get("hidden_act", "quick_gelu") != "quick_gelu" or cfg.get("projector_hidden_act", "gelu") != "gelu":
            raise hf_forward.ModelError(f"{path}: only quick_gelu vision MLPs and a gelu projector are implemented here")
        weights = hf_forward.read_weights(args.directory)
        dtype = np.float64

        def w(prefix):
            return lambda name: weights[prefix + name].astype(dtype)

        size, channels = vcfg["image_size"], vcfg.get("num_channels", 3)
        pixels = np.fromfile(args.pixels, dtype="<f4").astype(dtype).reshape(args.images, channels, size, size)
        states = clip_hidden_states(vcfg, w("vision_tower.vision_model."), pixels)
        features = states[cfg.get("vision_feature_layer", -2)]
        if cfg.get("vision_feature_select_strategy", "default") == "default":
            features = features[:, 1:]
        pw = w("multi_modal_projector.")
        x = features @ pw("linear_1.weight").T + pw("linear_1.bias")
        x = (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))) @ pw("linear_2.weight").T + pw("linear_2.bias")
        ids = np.array([[int(t) for t in row.split(",")] for row in args.tokens], dtype=np.int64)
        text = {name[len("language_model."):]: value for name, value in weights.items() if name.startswith("language_model.")}
        embeds = text["model.embed_tokens.weight"].astype(dtype)[ids]
        mask = ids == cfg.get("image_token_index", 32000)
        if mask.sum() != x.shape[0] * x.shape[1]:
            raise hf_forward.ModelError(f"{mask.sum()} image tokens for {x.shape[0] * x.shape[1]} image features")
        embeds[mask] = x.reshape(-1, x.shape[-1])  # row-major, as masked_scatter
        logits = hf_forward.forward(hf_forward.parse_config(tcfg, path + " text_config"), text, ids, dtype, [], embeds=embeds)
    except (KeyError, hf_forward.ModelError, ValueError, OSError) as e:
        print(f"llava_forward.py: {e}", file=sys.stderr)
        return 1
    logits.astype("<f4").tofile(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
