"""megacpp against PyTorch 2.x eager on the same Llama, side by side (run by scripts/bench.sh).

Both programs are started the same way (megacpp-run, which gives every rank OMP_NUM_THREADS and a
passive OpenMP wait policy), on the same libtorch and BLAS (the PyTorch 2.6 root), with the same
model (the parameter counts are checked equal), the same tokens per iteration, fp32, AdamW and
gradient clipping. Time per iteration is the median over the iterations after the warm-up; peak
memory is the largest resident set of any rank (wait4's rusage). Ratios are megacpp / PyTorch:
below 1 megacpp is faster or smaller.

  python3 bench/bench.py [--build build-pytorch2] [--sections abcde] [--iters 13] [--warmup 3]

Section (f) is megacpp alone: peak memory and time per iteration at a long sequence, with and
without TiledMLP and Ulysses (python3 bench/bench.py --build build --sections f runs it on
Debian's libtorch too).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = dict(layers=4, hidden=256, heads=4, ffn=688, seq=256, vocab=8192, batch=4)
TIME_RE = re.compile(r"elapsed time per iteration \(ms\): ([0-9.]+)")
PARAMS_RE = re.compile(r"model \w+: (\d+) parameters")


class Run:
    def __init__(self, ms, peak_mb, parameters, tokens):
        self.ms, self.peak_mb, self.parameters, self.tokens = ms, peak_mb, parameters, tokens


# glibc settings that keep freed memory in the process, as megacpp-train sets them itself (Note
# [Host memory]); given to PyTorch for a like-for-like row, and MEGACPP_KEEP_HOST_MEMORY=0 gives
# megacpp glibc's defaults.
KEEP_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
GLIBC_DEFAULTS = {"MEGACPP_KEEP_HOST_MEMORY": "0"}


def execute(command, what, env=None):
    """Runs `command`; returns its output and the peak RSS (MB) of it and every rank it waited for."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(os.environ, **(env or {})))
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        sys.exit(f"bench: {what} failed ({process.returncode}):\n{output[-4000:]}\ncommand: {' '.join(command)}")
    return output, usage.ru_maxrss / 1024.0


def parse(output, what, warmup):
    times = [float(m) for m in TIME_RE.findall(output)]
    params = PARAMS_RE.search(output)
    if len(times) <= warmup or not params:
        sys.exit(f"bench: {what}: expected per-iteration times and a parameter count in:\n{output[-3000:]}")
    return statistics.median(times[warmup:]), int(params.group(1))


def launcher(args, ranks, threads):
    return [os.path.join(args.build, "megacpp-run"), "--nproc-per-node", str(ranks), "--master-port", "0",
            "--omp-num-threads", str(threads)]


def megacpp(args, cfg, ranks, threads, fsdp):
    """fsdp: 'none', 'root' (one group) or 'layers' (a group per decoder layer, then the root)."""
    command = launcher(args, ranks, threads) + [
        os.path.join(args.build, "megacpp-train"), "--model-type", "llama", "--mock-data", "--num-layers", str(cfg["layers"]),
        "--hidden-size", str(cfg["hidden"]), "--num-attention-heads", str(cfg["heads"]),
        "--ffn-hidden-size", str(cfg["ffn"]), "--seq-length", str(cfg["seq"]),
        "--max-position-embeddings", str(cfg["seq"]), "--tokenizer-type", "NullTokenizer",
        "--vocab-size", str(cfg["vocab"] - 1),
        "--make-vocab-size-divisible-by", "1", "--micro-batch-size", "1",
        "--global-batch-size", str(cfg["batch"]), "--train-iters", str(args.iters), "--log-interval", "1",
        "--eval-iters", "0", "--lr", "1e-4"]
    if fsdp != "none":
        command += ["--use-torch-fsdp2"]
        if fsdp == "layers":
            command += ["--fsdp2-config-path", args.layers_yaml]
    return command


def pytorch(args, cfg, ranks, threads, fsdp):
    return launcher(args, ranks, threads) + [
        sys.executable, os.path.join(HERE, "pytorch_llama.py"), "--num-layers", str(cfg["layers"]),
        "--hidden-size", str(cfg["hidden"]), "--num-attention-heads", str(cfg["heads"]),
        "--ffn-hidden-size", str(cfg["ffn"]), "--seq-length", str(cfg["seq"]), "--vocab-size", str(cfg["vocab"]),
        "--global-batch-size", str(cfg["batch"]), "--train-iters", str(args.iters), "--fsdp", fsdp,
        "--no-reshard-after-forward"]


def measure(args, cfg, ranks=1, threads=1, fsdp="none", megacpp_env=None, pytorch_env=None):
    """Both sides on one configuration: (megacpp Run, PyTorch Run)."""
    runs = []
    for side, make, env in (("megacpp", megacpp, megacpp_env), ("pytorch", pytorch, pytorch_env)):
        what = f"{side} {cfg} ranks={ranks} threads={threads} fsdp={fsdp} env={env}"
        output, peak = execute(make(args, cfg, ranks, threads, fsdp), what, env)
        ms, parameters = parse(output, what, args.warmup)
        runs.append(Run(ms, peak, parameters, cfg["batch"] * cfg["seq"]))
    if runs[0].parameters != runs[1].parameters:
        sys.exit(f"bench: the two models differ: megacpp {runs[0].parameters} vs PyTorch {runs[1].parameters} parameters")
    return runs


def table(title, header, rows):
    print(f"\n{title}")
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    for row in [header] + rows:
        print("  " + "  ".join(str(x).rjust(w) for x, w in zip(row, widths)))


def ratio(a, b):
    return f"{a / b:.2f}"


def section_a(args):
    rows = []
    for threads in (1, 2):
        m, p = measure(args, BASE, threads=threads)
        m_glibc, p_kept = measure(args, BASE, threads=threads, megacpp_env=GLIBC_DEFAULTS, pytorch_env=KEEP_MEMORY)
        rows.append([threads, f"{m.ms:.1f}", f"{p.ms:.1f}", ratio(m.ms, p.ms), f"{m.peak_mb:.0f}", f"{p.peak_mb:.0f}",
                     ratio(m.peak_mb, p.peak_mb), f"{m_glibc.ms:.1f}", f"{p_kept.ms:.1f}", ratio(m.ms, p_kept.ms)])
    table("(a) one process, no sharding: median ms/iteration and peak RSS (MB); then both with glibc's malloc\n"
          "    defaults (megacpp with MEGACPP_KEEP_HOST_MEMORY=0) and both keeping freed memory (PyTorch with\n"
          "    MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ as megacpp sets them)",
          ["threads", "megacpp ms", "pytorch ms", "ratio", "megacpp MB", "pytorch MB", "ratio",
           "megacpp glibc ms", "pytorch kept ms", "ratio kept"], rows)


def section_b(args):
    rows = []
    for fsdp in ("root", "layers"):
        m, p = measure(args, BASE, ranks=2, fsdp=fsdp)
        rows.append([fsdp, f"{m.ms:.1f}", f"{p.ms:.1f}", ratio(m.ms, p.ms), f"{m.peak_mb:.0f}", f"{p.peak_mb:.0f}"])
    table("(b) 2 ranks, FSDP2 on Gloo (1 thread per rank): megacpp --use-torch-fsdp2 vs fully_shard",
          ["groups", "megacpp ms", "pytorch ms", "ratio", "megacpp MB/rank", "pytorch MB/rank"], rows)


def section_c(args):
    rows = []
    points = [dict(hidden=h, heads=h // 64, ffn=h * 688 // 256) for h in (128, 256, 512)]
    points += [dict(seq=s) for s in (128, 512, 1024)]
    for change in points:
        cfg = dict(BASE, **change)
        m, p = measure(args, cfg)
        rows.append([cfg["hidden"], cfg["seq"], m.parameters, f"{m.ms:.1f}", f"{p.ms:.1f}", ratio(m.ms, p.ms)])
    table("(c) growth with hidden size and sequence length (one process, 1 thread)",
          ["hidden", "seq", "parameters", "megacpp ms", "pytorch ms", "ratio"], rows)


def section_d(args):
    one_1, py_1 = measure(args, BASE, threads=1)
    one_2, py_2 = measure(args, BASE, threads=2)
    two, py_two = measure(args, BASE, ranks=2, fsdp="layers")
    rows = [["megacpp", f"{one_1.ms:.1f}", f"{one_2.ms:.1f}", f"{two.ms:.1f}", ratio(two.ms, one_2.ms), ratio(two.ms, one_1.ms)],
            ["pytorch", f"{py_1.ms:.1f}", f"{py_2.ms:.1f}", f"{py_two.ms:.1f}", ratio(py_two.ms, py_2.ms), ratio(py_two.ms, py_1.ms)]]
    table("(d) FSDP overhead: 2 ranks x 1 thread (a group per layer) against 1 rank on the same global batch",
          ["", "1 rank x 1 ms", "1 rank x 2 ms", "2 ranks ms", "2 ranks / (1 x 2)", "2 ranks / (1 x 1)"], rows)


def section_e(args):
    rows = []
    for ranks in (1, 2, 4):
        m, p = measure(args, BASE, ranks=ranks, fsdp="layers" if ranks > 1 else "none")
        rows.append([ranks, f"{m.peak_mb:.0f}", f"{p.peak_mb:.0f}", ratio(m.peak_mb, p.peak_mb)])
    table("(e) peak memory per rank (MB; FSDP2 with a group per layer above 1 rank)",
          ["ranks", "megacpp", "pytorch", "ratio"], rows)


LONG = dict(BASE, seq=4096, batch=2)


def section_f(args):
    iters, warmup = min(args.iters, 5), min(args.warmup, 1)
    rows = []
    for ulysses in (1, 2):
        for tiles in (0, 4):
            path = os.path.join(args.scratch, f"long_{ulysses}_{tiles}.yaml")
            with open(path, "w") as f:
                f.write(f"sub_modules_to_wrap:\n  - layers.{{*}}\nulysses_size: {ulysses}\n")
                if tiles:
                    f.write(f"apply_tiled_mlp: true\ntiled_num_shards: {tiles}\n")
            command = megacpp(argparse.Namespace(**dict(vars(args), iters=iters)), LONG, 2, 1, "root")
            command += ["--fsdp2-config-path", path]
            what = f"megacpp long sequence ulysses={ulysses} tiles={tiles}"
            output, peak = execute(command, what)
            ms, _ = parse(output, what, warmup)
            rows.append([ulysses, tiles or "off", f"{ms:.1f}", f"{peak:.0f}"])
    base = float(rows[0][3])
    for row in rows:
        row.append(ratio(float(row[3]), base))
    table(f"(f) megacpp at {LONG['seq']} tokens, 2 ranks (FSDP, a group per layer; global batch {LONG['batch']}): "
          f"median ms/iteration of {iters - warmup} and peak RSS per rank (MB)",
          ["ulysses_size", "tiled MLP", "ms", "MB/rank", "MB vs first row"], rows)


def main():
    parser = argparse.ArgumentParser(description="megacpp against PyTorch 2.x eager, side by side")
    parser.add_argument("--build", default="build-pytorch2", help="megacpp build directory (default build-pytorch2)")
    parser.add_argument("--sections", default="abcde")
    parser.add_argument("--iters", type=int, default=13)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    against = "alone"
    if set(args.sections) - {"f"}:
        import torch
        against = f"and PyTorch {torch.__version__} eager"
    print(f"bench: megacpp ({args.build}) {against}; {os.cpu_count()} cores; "
          f"{args.iters} iterations, median of the last {args.iters - args.warmup}")
    if set(args.sections) - {"f"}:
        print("model: Llama, {layers} layers, hidden {hidden}, {heads} heads, ffn {ffn}, sequence {seq}, vocabulary {vocab}, "
              "global batch {batch} (micro-batch 1), fp32, AdamW, clip 1.0".format(**BASE))
    with tempfile.TemporaryDirectory() as scratch:
        args.scratch = scratch
        args.layers_yaml = os.path.join(scratch, "layers.yaml")
        with open(args.layers_yaml, "w") as f:
            # PyTorch 2.6's fully_shard fails on the CPU when it re-gathers a group for backward
            # (the gather bumps the version of tensors autograd saved): both sides keep groups
            # gathered from forward to backward.
            f.write("sub_modules_to_wrap:\n  - layers.{*}\nreshard_after_forward: false\n")
        for name in args.sections:
            globals()["section_" + name](args)


if __name__ == "__main__":
    main()
