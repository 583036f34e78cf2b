#!/usr/bin/env python3
"""An independent forward pass of Hugging Face's LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM / Qwen3MoeForCausalLM in NumPy.

Reads a Hugging Face model folder (config.json, and model.safetensors or
model.safetensors.index.json with its shards) and prints or saves the logits for token ids.
It shares no code with megacpp: the files are parsed by safetensors_reader.py (next to this
file) and the math is transformers' modeling_llama.py / modeling_mistral.py / modeling_qwen2.py / modeling_qwen3.py /
modeling_qwen3_moe.py,
eager attention:

  h = embed_tokens[ids]
  per layer:  x = RMSNorm(h);  q, k, v = x Wq^T, x Wk^T, x Wv^T split into heads of head_dim
              (Qwen2: q, k, v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv; o_proj has no bias)
              (Qwen3: q, k = RMSNorm over head_dim with q_norm / k_norm, before rotary)
              rotary (rotate_half; inv_freq = 1 / theta^(arange(0, d, 2) / d), positions 0..s-1)
              k, v repeated for grouped-query attention (repeat_kv)
              h += softmax(q k^T / sqrt(head_dim) + causal mask) v  Wo^T
              (Mistral with sliding_window w: the mask also hides key j from query i when i - j >= w)
              h += down(silu(gate(RMSNorm(h))) * up(RMSNorm(h)))
              (Qwen3-MoE sparse layers, Qwen3MoeSparseMoeBlock: p = softmax(x gate^T) per token, its
               top num_experts_per_tok experts, weights renormalized to sum 1 when norm_topk_prob,
               h += sum over those experts of weight * expert_e(x), each expert the MLP above; a
               layer is sparse unless in mlp_only_layers, when (layer + 1) % decoder_sparse_step == 0)
  logits = RMSNorm(h) lm_head^T   (lm_head = embed_tokens when tied and there is no lm_head.weight)
  Qwen3-MoE's load-balancing loss (load_balancing_loss_func, no attention mask): the router
  logits of every sparse layer, all tokens of the batch, concatenated to R rows; p = softmax,
  its top-k experts one-hot [R, k, E]; loss = E * sum((mean over rows of the one-hot) *
  (mean over rows of p)), summed over k and E.
RMSNorm(x) = weight * x / sqrt(mean(x^2) + rms_norm_eps). Weights stored as BF16 / F16 / F32 are
widened exactly; the arithmetic runs in --dtype (float64 by default, so the result is the exact
math to ~1e-12; float32 is what HF computes for an fp32 model).

Usage: hf_forward.py HF_DIR --tokens 1,2,3 [--tokens 4,5,6 ...] [--out FILE] [--dtype float32|float64]
                      [--load-balancing-loss-out FILE] [--peft ADAPTER_DIR] [--log-probs-out FILE]
With --peft, the model runs with PEFT's LoRA adapters (peft/tuners/lora/layer.py, Linear.forward):
every nn.Linear that target_modules names (PEFT's rule: the module's name or a suffix after a dot;
a string is a regular expression of the whole name) computes x W^T + (x A^T) B^T * lora_alpha / r;
a named module without an adapter, or an adapter no named module uses, is refused.
Every --tokens is one sequence of the batch (all the same length). The logits [batch, seq, vocab]
are written to FILE (.npy: numpy.save; any other name: raw little-endian float32, C order), or
printed as JSON when there is no --out; the load-balancing loss (Qwen3-MoE) to the other FILE as
text; with --log-probs-out, each sequence's next-token log-probabilities (verl's logprobs_from_logits:
log_softmax(logits)[t, ids[t + 1]], in float64 from the logits before they are rounded to float32)
to that FILE as JSON, one list of seq - 1 numbers per sequence. Refuses, naming the key, a config whose features this
does not implement. Exit status 0 on success; otherwise the reason on stderr and 1.
"""
import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_reader  # noqa: E402


class ModelError(Exception):
    pass


def read_config(directory):
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        return parse_config(json.load(f), path)


def parse_config(cfg, path):
    """The settings forward() needs, from a text model's config (path names it in errors)."""
    model_type = cfg.get("model_type")
    if model_type not in ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe"):
        raise ModelError(f"{path}: model_type {model_type!r} is not llama, mistral, qwen2, qwen3 or qwen3_moe")

    def refuse(key, allowed):
        if cfg.get(key) is not None and cfg[key] != allowed:
            raise ModelError(f"{path}: key {key!r} = {cfg[key]!r} is not implemented here")

    qkv_bias = model_type == "qwen2"  # Qwen2Attention: q/k/v_proj bias=True whatever the config says
    for key, allowed in [("rope_scaling", None), ("hidden_act", "silu"), ("mlp_bias", False),
                         ("use_sliding_window", False), ("partial_rotary_factor", 1.0)]:
        refuse(key, allowed)
    if not qkv_bias:
        refuse("attention_bias", False)
    if any(t != "full_attention" for t in cfg.get("layer_types") or []):
        raise ModelError(f"{path}: key 'layer_types': only full_attention is implemented here")
    heads = cfg["num_attention_heads"]
    default_head_dim = 128 if model_type == "qwen3" else cfg["hidden_size"] // heads  # Qwen3Config's default
    moe = model_type == "qwen3_moe"
    step, dense = cfg.get("decoder_sparse_step", 1), cfg.get("mlp_only_layers") or []
    sparse = [moe and cfg.get("num_experts", 128) > 0 and i not in dense and (i + 1) % step == 0
              for i in range(cfg["num_hidden_layers"])]
    return {
        "qk_norm": model_type in ("qwen3", "qwen3_moe"),
        "qkv_bias": qkv_bias,
        "sparse": sparse,
        "top_k": cfg.get("num_experts_per_tok", 8),
        "norm_topk_prob": cfg.get("norm_topk_prob", False),
        "layers": cfg["num_hidden_layers"],
        "heads": heads,
        "kv_heads": cfg.get("num_key_value_heads") or heads,
        "head_dim": cfg.get("head_dim") or default_head_dim,
        "eps": cfg.get("rms_norm_eps", 1e-6),
        "theta": cfg.get("rope_theta", 10000.0),
        "tied": cfg.get("tie_word_embeddings", False),
        "window": cfg.get("sliding_window", 4096) if model_type == "mistral" else None,  # MistralConfig's default
    }


def to_array(dtype, shape, data):
    if dtype == "BF16":
        values = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    elif dtype in ("F32", "F16", "F64"):
        values = np.frombuffer(data, dtype=safetensors_reader.NUMPY[dtype])
    else:
        raise ModelError(f"weights of dtype {dtype} are not supported")
    return values.reshape(shape)


def read_weights(directory):
    index_path = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            weight_map = json.load(f)["weight_map"]
    else:
        weight_map = None
    files = sorted(set(weight_map.values())) if weight_map else ["model.safetensors"]
    weights = {}
    for filename in files:
        with open(os.path.join(directory, filename), "rb") as f:
            _, _, entries, _, buffer = safetensors_reader.parse(f.read())
        for name, info in entries.items():
            if weight_map is not None and weight_map.get(name) != filename:
                continue  # as transformers: the index decides which file holds a tensor
            begin, end = info["data_offsets"]
            weights[name] = to_array(info["dtype"], info["shape"], buffer[begin:end])
    return weights


def rms_norm(x, weight, eps):
    return weight * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def mlp(lin, p, x):
    gate, up = lin(x, p + "gate_proj"), lin(x, p + "up_proj")
    return lin(gate / (1.0 + np.exp(-gate)) * up, p + "down_proj")


def sparse_mlp(cfg, lin, p, x, router_logits):
    logits = lin(x, p + "gate")  # [b, s, experts]
    router_logits.append(logits.reshape(-1, logits.shape[-1]))
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    chosen = np.argsort(-probs, axis=-1, kind="stable")[..., :cfg["top_k"]]
    weights = np.take_along_axis(probs, chosen, axis=-1)
    if cfg["norm_topk_prob"]:
        weights = weights / weights.sum(-1, keepdims=True)
    out = np.zeros_like(x)
    for e in range(probs.shape[-1]):
        weight_e = (weights * (chosen == e)).sum(-1, keepdims=True)  # 0 where e was not chosen
        if weight_e.any():
            out = out + weight_e * mlp(lin, p + f"experts.{e}.", x)
    return out


def load_balancing_loss(router_logits, top_k):
    logits = np.concatenate(router_logits, axis=0)  # [R, E]
    experts = logits.shape[-1]
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]  # [R, k]
    one_hot = (chosen[..., None] == np.arange(experts)).astype(probs.dtype)  # [R, k, E]
    return float((one_hot.mean(0) * probs.mean(0)[None, :]).sum() * experts)


def read_peft(directory):
    """PEFT's LoRA adapters: {module: (lora_A [r, in], lora_B [out, r])}, the scaling, the targets."""
    path = os.path.join(directory, "adapter_config.json")
    with open(path) as f:
        cfg = json.load(f)
    if cfg.get("peft_type") != "LORA":
        raise ModelError(f"{path}: peft_type {cfg.get('peft_type')!r} is not LORA")
    for key, allowed in [("use_dora", False), ("use_rslora", False), ("bias", "none"), ("fan_in_fan_out", False),
                         ("rank_pattern", {}), ("alpha_pattern", {}), ("modules_to_save", None)]:
        if cfg.get(key, allowed) != allowed:
            raise ModelError(f"{path}: key {key!r} = {cfg[key]!r} is not implemented here")
    with open(os.path.join(directory, "adapter_model.safetensors"), "rb") as f:
        _, _, entries, _, buffer = safetensors_reader.parse(f.read())
    factors = {}
    for name, info in entries.items():
        begin, end = info["data_offsets"]
        factors[name] = to_array(info["dtype"], info["shape"], buffer[begin:end])
    adapters, prefix = {}, "base_model.model."
    for name in factors:
        if not name.startswith(prefix) or not name.endswith(".lora_A.weight"):
            if not name.endswith(".lora_B.weight"):
                raise ModelError(f"adapter_model.safetensors: {name!r} is no PEFT LoRA weight name")
            continue
        module = name[len(prefix):-len(".lora_A.weight")]
        up = prefix + module + ".lora_B.weight"
        if up not in factors:
            raise ModelError(f"adapter_model.safetensors: {name!r} has no {up!r}")
        adapters[module] = (factors[name], factors[up])
    if 2 * len(adapters) != len(factors):
        raise ModelError("adapter_model.safetensors: a lora_B.weight without its lora_A.weight")
    targets = cfg["target_modules"]
    if isinstance(targets, str):  # PEFT: a regular expression the whole module name must match
        matches = lambda module: re.fullmatch(targets, module) is not None  # noqa: E731
    else:  # PEFT: the name itself or a suffix after a dot
        matches = lambda module: any(module == t or module.endswith("." + t) for t in targets)  # noqa: E731
    return adapters, cfg["lora_alpha"] / cfg["r"], matches


def forward(cfg, weights, ids, dtype, router_logits, peft=None, embeds=None):
    """Logits for ids; embeds [batch, seq, hidden], when given, replace embed_tokens[ids] (inputs_embeds)."""
    def w(name):
        if name not in weights:
            raise ModelError(f"missing weight {name}")
        return weights[name].astype(dtype)

    adapters, scaling, targeted = peft or ({}, 0.0, lambda module: False)
    used = set()

    def lin(x, module):  # nn.Linear without bias; PEFT's LoRA layer where target_modules names it
        y = x @ w(module + ".weight").T
        if targeted(module) and module not in adapters:
            raise ModelError(f"target_modules names {module}, which has no adapter (PEFT would start it untrained)")
        if targeted(module):
            down, up = adapters[module]
            used.add(module)
            y = y + (x @ down.astype(dtype).T) @ up.astype(dtype).T * scaling
        return y

    batch, seq = ids.shape
    heads, kv_heads, d, eps = cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["eps"]
    inv_freq = 1.0 / (cfg["theta"] ** (np.arange(0, d, 2, dtype=np.int64).astype(dtype) / d))
    freqs = np.outer(np.arange(seq).astype(dtype), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)  # [seq, d]
    cos, sin = np.cos(emb), np.sin(emb)
    mask = np.triu(np.full((seq, seq), -np.inf, dtype=dtype), 1)
    if cfg["window"] is not None:  # transformers' sliding_window_overlay: kv_idx > q_idx - sliding_window
        positions = np.arange(seq)
        mask[positions[:, None] - positions[None, :] >= cfg["window"]] = -np.inf
    h = w("model.embed_tokens.weight")[ids] if embeds is None else embeds.astype(dtype)
    for i in range(cfg["layers"]):
        p = f"model.layers.{i}."
        x = rms_norm(h, w(p + "input_layernorm.weight"), eps)

        def heads_of(name, n, norm=None):  # [b, s, n*d] -> [b, n, s, d]
            y = lin(x, p + f"self_attn.{name}")
            if cfg["qkv_bias"]:
                y = y + w(p + f"self_attn.{name}.bias")
            y = y.reshape(batch, seq, n, d)
            if norm is not None:
                y = rms_norm(y, w(p + f"self_attn.{norm}.weight"), eps)
            return y.transpose(0, 2, 1, 3)

        qk = cfg["qk_norm"]
        q = heads_of("q_proj", heads, "q_norm" if qk else None)
        k = heads_of("k_proj", kv_heads, "k_norm" if qk else None)
        v = heads_of("v_proj", kv_heads)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = np.repeat(k, heads // kv_heads, axis=1), np.repeat(v, heads // kv_heads, axis=1)  # repeat_kv
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + mask
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        attn = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, heads * d)
        h = h + lin(attn, p + "self_attn.o_proj")
        x = rms_norm(h, w(p + "post_attention_layernorm.weight"), eps)
        h = h + (sparse_mlp(cfg, lin, p + "mlp.", x, router_logits) if cfg["sparse"][i] else mlp(lin, p + "mlp.", x))
    h = rms_norm(h, w("model.norm.weight"), eps)
    tied = cfg["tied"] and "lm_head.weight" not in weights
    logits = h @ w("model.embed_tokens.weight").T if tied else lin(h, "lm_head")
    if set(adapters) - used:
        raise ModelError(f"adapters that target_modules does not name, or for modules the model does not have (PEFT "
                         f"ignores them): {sorted(set(adapters) - used)}")
    return logits


def next_token_log_probs(logits, ids):
    """log p(ids[b, t + 1] | ids[b, :t + 1]) [batch, seq - 1]: a log-softmax over the vocabulary."""
    shifted = logits[:, :-1, :] - logits[:, :-1, :].max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return np.take_along_axis(log_p, ids[:, 1:, None], axis=-1)[..., 0]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("hf_dir")
    parser.add_argument("--tokens", action="append", required=True, help="comma-separated ids (one per sequence)")
    parser.add_argument("--out")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    parser.add_argument("--load-balancing-loss-out")
    parser.add_argument("--peft", help="a PEFT LoRA adapter folder to run the model with")
    parser.add_argument("--log-probs-out", help="write each sequence's next-token log-probabilities here (JSON)")
    args = parser.parse_args(argv[1:])
    try:
        rows = [[int(t) for t in text.split(",")] for text in args.tokens]
        if len({len(r) for r in rows}) != 1:
            raise ModelError("every --tokens must have the same length")
        ids = np.array(rows, dtype=np.int64)
        weights = read_weights(args.hf_dir)
        vocab = weights["model.embed_tokens.weight"].shape[0]
        if ids.min() < 0 or ids.max() >= vocab:
            raise ModelError(f"token ids must be in [0, {vocab})")
        cfg, router_logits = read_config(args.hf_dir), []
        peft = read_peft(args.peft) if args.peft else None
        exact = forward(cfg, weights, ids, np.dtype(args.dtype), router_logits, peft).astype(np.float64)
        logits = exact.astype(np.float32)
        if args.log_probs_out is not None:
            with open(args.log_probs_out, "w") as f:
                json.dump(next_token_log_probs(exact, ids).tolist(), f)
        if args.load_balancing_loss_out is not None:
            if not router_logits:
                raise ModelError("--load-balancing-loss-out: the model has no sparse (MoE) layer")
            with open(args.load_balancing_loss_out, "w") as f:
                f.write(repr(load_balancing_loss(router_logits, cfg["top_k"])) + "\n")
    except KeyError as e:
        print(f"hf_forward.py: missing key {e}", file=sys.stderr)
        return 1
    except (ModelError, safetensors_reader.FormatError, ValueError, OSError) as e:
        print(f"hf_forward.py: {e}", file=sys.stderr)
        return 1
    if args.out is None:
        print(json.dumps(logits.tolist()))
    elif args.out.endswith(".npy"):
        np.save(args.out, logits)
    else:
        logits.astype("<f4").tofile(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
