"""The PyTorch side of megacpp's benchmark (bench/bench.py): the Llama model megacpp-train builds
(RMSNorm, rotary, grouped-query attention, SwiGLU, tied output layer), trained as megacpp-train
trains it (AdamW, gradient clipping, micro-batch accumulation, fp32), in PyTorch 2.x eager, on one
process or under FSDP2's fully_shard on Gloo (CPU) or NCCL (--device cuda). With --bf16, as
megacpp-train's --bf16: fully_shard's MixedPrecisionPolicy computes in bf16 and reduces in fp32
over fp32 master shards (needs --fsdp). Ranks come from the torchrun environment (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; megacpp-run sets them too).

Prints one line per iteration in megacpp-train's format ("elapsed time per iteration (ms): T")
and the parameter count, so bench.py and gpu_check.py read both programs the same way; on a GPU,
the peak of torch.cuda.max_memory_allocated at the end.
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, 1)
            v = v.repeat_interleave(self.heads // self.kv_heads, 1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1))


class DecoderLayer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.input_layernorm = RMSNorm(a.hidden_size, a.norm_epsilon)
        self.self_attn = Attention(a.hidden_size, a.num_attention_heads, a.num_query_groups or a.num_attention_heads)
        self.post_attention_layernorm = RMSNorm(a.hidden_size, a.norm_epsilon)
        self.gate_proj = nn.Linear(a.hidden_size, a.ffn_hidden_size, bias=False)
        self.up_proj = nn.Linear(a.hidden_size, a.ffn_hidden_size, bias=False)
        self.down_proj = nn.Linear(a.ffn_hidden_size, a.hidden_size, bias=False)

    def forward(self, x, cos, sin):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin)
        m = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed_tokens = nn.Embedding(a.vocab_size, a.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(a) for _ in range(a.num_layers))
        self.norm = RMSNorm(a.hidden_size, a.norm_epsilon)
        head_dim = a.hidden_size // a.num_attention_heads
        inv_freq = 1.0 / a.rotary_base ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim)
        freqs = torch.outer(torch.arange(a.seq_length, dtype=torch.float), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, ids):
        h = self.embed_tokens(ids)
        cos, sin = self.cos.to(h.dtype), self.sin.to(h.dtype)  # bf16 under --bf16, as the activations
        for layer in self.layers:
            h = layer(h, cos, sin)
        return F.linear(self.norm(h), self.embed_tokens.weight)  # tied output layer


def cpu_streams_for_fully_shard():
    """fully_shard records and waits for events on its streams even on the CPU, and PyTorch 2.6's
    torch.cpu.Stream has neither method (later releases have them). CPU kernels run
    synchronously on the calling thread, so an event is complete when it is recorded and waiting
    for it is a no-op: these stand-ins change no result and cost nothing."""
    stream = torch.cpu.Stream
    if not hasattr(stream, "record_event"):
        def record_event(self, event=None):
            event = event or torch.cpu.Event()
            event.record(self)
            return event
        stream.record_event = record_event
    if not hasattr(stream, "wait_event"):
        stream.wait_event = lambda self, event: None


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in [("num-layers", 4), ("hidden-size", 256), ("num-attention-heads", 4),
                          ("num-query-groups", 0), ("ffn-hidden-size", 688), ("seq-length", 256),
                          ("vocab-size", 8192), ("micro-batch-size", 1), ("global-batch-size", 4),
                          ("train-iters", 13), ("seed", 1234)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--rotary-base", type=float, default=10000.0)
    p.add_argument("--norm-epsilon", type=float, default=1e-5)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--fsdp", choices=["none", "root", "layers"], default="none",
                   help="fully_shard nothing, only the root module (one group), or every layer and the root")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--bf16", action="store_true", help="fully_shard's mixed precision: bf16 compute, fp32 reduction")
    p.add_argument("--no-reshard-after-forward", dest="reshard_after_forward", action="store_false",
                   help="keep each group gathered from its forward to its backward")
    p.add_argument("--sync-every-micro-batch", action="store_true",
                   help="reduce-scatter the gradients after every micro-batch (fully_shard's default); without it, "
                        "only after the last one (set_requires_gradient_sync), as megacpp does")
    return p.parse_args()


def main():
    a = parse()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if a.bf16 and a.fsdp == "none":
        raise SystemExit("pytorch_llama.py: --bf16 is fully_shard's mixed precision: give --fsdp root|layers")
    device = torch.device(a.device, int(os.environ.get("LOCAL_RANK", "0")) if a.device == "cuda" else None)
    if a.device == "cuda":
        torch.cuda.set_device(device)
    if a.fsdp != "none" or world > 1:
        torch.distributed.init_process_group("nccl" if a.device == "cuda" else "gloo", rank=rank, world_size=world)
    torch.manual_seed(a.seed)
    model = Llama(a)
    for module in model.modules():  # megacpp's init: N(0, 0.02) for every matrix, norms at 1
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
    parameters = sum(p.numel() for p in model.parameters())
    if a.fsdp != "none":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        if a.device == "cpu":
            cpu_streams_for_fully_shard()
        model.to(device)
        mesh = init_device_mesh(a.device, (world,))
        options = dict(mesh=mesh, reshard_after_forward=a.reshard_after_forward)
        if a.bf16:
            from torch.distributed.fsdp import MixedPrecisionPolicy
            options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if a.fsdp == "layers":
            for layer in model.layers:
                fully_shard(layer, **options)
        fully_shard(model, **options)
    elif world > 1:
        raise SystemExit("pytorch_llama.py: several ranks need --fsdp root|layers")
    else:
        model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    micro_batches = a.global_batch_size // (a.micro_batch_size * world)
    tokens = a.global_batch_size * a.seq_length
    if rank == 0:
        print(f"pytorch {torch.__version__} | model llama: {parameters} parameters | tokens per iteration {tokens} | "
              f"threads {torch.get_num_threads()} | fsdp {a.fsdp} | world {world}", flush=True)
    generator = torch.Generator().manual_seed(a.seed + rank)
    for iteration in range(1, a.train_iters + 1):
        start = time.perf_counter()
        total = 0.0
        for m in range(micro_batches):
            if a.fsdp != "none" and not a.sync_every_micro_batch:
                # reduce-scatter once, after the last micro-batch's backward, as megacpp's engine does
                model.set_requires_gradient_sync(m == micro_batches - 1)
            ids = torch.randint(0, a.vocab_size, (a.micro_batch_size, a.seq_length + 1), generator=generator).to(device)
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, a.vocab_size), ids[:, 1:].reshape(-1)) / micro_batches
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        if rank == 0:
            print(f" iteration {iteration:8d}/{a.train_iters:8d} | elapsed time per iteration (ms): {elapsed_ms:.1f} | "
                  f"lm loss: {total:.6E} |", flush=True)
    if a.device == "cuda" and rank == 0:
        print(f"pytorch: peak GPU memory allocated {torch.cuda.max_memory_allocated(device) / 2**20:.1f} MiB", flush=True)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
