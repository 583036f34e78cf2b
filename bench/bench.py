"""megacpp against PyTorch 2.x eager on the same Llama, side by side (run by scripts/bench.sh).

Like for like: both programs are started by megacpp-run (every rank gets OMP_NUM_THREADS and a
passive OpenMP wait policy), on the same libtorch and OpenBLAS (the PyTorch 2.6 root's), with
the same model (parameter counts checked equal), tokens per iteration, fp32, AdamW, gradient
clipping, attention kernel class (SDPA on both sides) and gradient-reduction work (one
reduce-scatter per iteration: PyTorch's fully_shard skips it on all but the last micro-batch with
set_requires_gradient_sync, as megacpp's engine does). The allocator settings are equal too:
"kept" gives PyTorch the glibc settings megacpp-train applies to itself (Note [Host memory]),
"glibc" gives megacpp glibc's defaults (MEGACPP_KEEP_HOST_MEMORY=0), as PyTorch has them.

Each case runs --repeats times interleaved (megacpp, PyTorch, megacpp, ...); a run's figure is
the median time per iteration after the warm-up and the peak resident set of its largest rank
(wait4's rusage). The machine's 1-minute load average is sampled before every run. The results
go to --json, which bench/report.py turns into docs/performance.md's tables.

  python3 bench/bench.py [--sections abcdefgik] [--repeats 3] [--iters 13] [--warmup 3] [--json FILE]
  python3 bench/bench.py --sections h [--scaling-hidden 128,256,512,1024] [--scaling-seq 64,256,1024,4096]
                         [--scaling-ranks 1,2,4] --json bench/scaling.json
  python3 bench/bench.py --sections l --json bench/tensor_parallel.json

Section (g) runs megacpp built on Debian's libtorch 1.13 (--build-113, outside the root, its
own attention: no SDPA there) against the same PyTorch 2.6. Section (f) is megacpp alone: peak
memory and time at a long sequence with and without TiledMLP and Ulysses. Section (i) measures
megacpp's fused CPU kernels: megacpp with them, with libtorch's composition instead
(--no-kernel-fusion), and PyTorch, interleaved; section (k) times each kernel alone against its
composition (megacpp-bench-kernels) on both libtorches. Section (l) is megacpp alone too (libtorch
1.13): Megatron's tensor parallelism against FSDP2 on the same ranks and global batch, TP 2
against FSDP 2 on 2 ranks and TP 2 x FSDP 2 against FSDP 4 on 4, interleaved (a comparison of
layouts, whose communication differs by design: TP all-reduces activations in every block, FSDP2
gathers parameters and reduce-scatters gradients); run on its own (scripts/bench.sh
--tensor-parallel), into its own block. Section (h), the
scaling grid (hidden size, sequence length, ranks), is run on its own (scripts/bench.sh
--scaling): about 20 minutes on 2 cores.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ROOT = ["bash", os.path.join(REPO, "scripts", "in_pytorch2_root.sh")]  # runs a command in the PyTorch 2.6 root
BASE = dict(layers=4, hidden=256, heads=4, ffn=688, seq=256, vocab=8192, batch=4)
TIME_RE = re.compile(r"elapsed time per iteration \(ms\): ([0-9.]+)")
PARAMS_RE = re.compile(r"model \w+: (\d+) parameters")

# glibc settings that keep freed memory in the process, as megacpp-train sets them itself (Note
# [Host memory]): the environment each side gets under each allocator setting.
KEEP_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
ALLOCATOR_ENV = {
    "kept": {"megacpp": {}, "megacpp-unfused": {}, "megacpp-1.13": {}, "megacpp-1.13-tp2": {}, "pytorch": KEEP_MEMORY},
    "glibc": {"megacpp": {"MEGACPP_KEEP_HOST_MEMORY": "0"}, "megacpp-1.13": {"MEGACPP_KEEP_HOST_MEMORY": "0"}, "pytorch": {}},
}


def execute(command, what, env):
    """Runs `command`; returns its output and the peak RSS (MB) of it and every rank it waited for."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(os.environ, **env))
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"bench: {what} failed ({code}):\n{output[-4000:]}\ncommand: {' '.join(command)}")
    return output, usage.ru_maxrss / 1024.0


def parse(output, what, warmup):
    times = [float(m) for m in TIME_RE.findall(output)]
    params = PARAMS_RE.search(output)
    if len(times) <= warmup or not params:
        sys.exit(f"bench: {what}: expected per-iteration times and a parameter count in:\n{output[-3000:]}")
    return statistics.median(times[warmup:]), int(params.group(1))


def launcher(build, ranks, threads):
    return [os.path.join(build, "megacpp-run"), "--nproc-per-node", str(ranks), "--master-port", "0",
            "--omp-num-threads", str(threads)]


def megacpp_command(args, build, cfg, ranks, threads, fsdp, iters):
    """fsdp: 'none', 'root' (one group) or 'layers' (a group per decoder layer, then the root)."""
    command = launcher(build, ranks, threads) + [
        os.path.join(build, "megacpp-train"), "--model-type", "llama", "--mock-data", "--num-layers", str(cfg["layers"]),
        "--hidden-size", str(cfg["hidden"]), "--num-attention-heads", str(cfg["heads"]),
        "--ffn-hidden-size", str(cfg["ffn"]), "--seq-length", str(cfg["seq"]),
        "--max-position-embeddings", str(cfg["seq"]), "--tokenizer-type", "NullTokenizer",
        "--vocab-size", str(cfg["vocab"] - 1), "--make-vocab-size-divisible-by", "1", "--micro-batch-size", "1",
        "--global-batch-size", str(cfg["batch"]), "--train-iters", str(iters), "--log-interval", "1",
        "--eval-iters", "0", "--lr", "1e-4"]
    if fsdp != "none":
        command += ["--use-torch-fsdp2"]
        if fsdp == "layers":
            command += ["--fsdp2-config-path", args.layers_yaml]
    return command


def pytorch_command(args, cfg, ranks, threads, fsdp, iters):
    return launcher(args.build, ranks, threads) + [
        "python3", os.path.join(HERE, "pytorch_llama.py"), "--num-layers", str(cfg["layers"]),
        "--hidden-size", str(cfg["hidden"]), "--num-attention-heads", str(cfg["heads"]),
        "--ffn-hidden-size", str(cfg["ffn"]), "--seq-length", str(cfg["seq"]), "--vocab-size", str(cfg["vocab"]),
        "--global-batch-size", str(cfg["batch"]), "--train-iters", str(iters), "--fsdp", fsdp,
        "--no-reshard-after-forward"]


def side_command(args, side, cfg, ranks, threads, fsdp, iters):
    if side == "pytorch":
        return ROOT + pytorch_command(args, cfg, ranks, threads, fsdp, iters)
    if side == "megacpp":
        return ROOT + megacpp_command(args, args.build, cfg, ranks, threads, fsdp, iters)
    if side == "megacpp-unfused":  # libtorch's composition instead of the fused kernels (Note [Fused kernels])
        return ROOT + megacpp_command(args, args.build, cfg, ranks, threads, fsdp, iters) + ["--no-kernel-fusion"]
    tensor_parallel = ["--tensor-model-parallel-size", "2"] if side == "megacpp-1.13-tp2" else []
    return megacpp_command(args, args.build_113, cfg, ranks, threads, fsdp, iters) + tensor_parallel  # on this machine


def blas_env(args, side):
    """Debian bookworm's OpenBLAS (megacpp-1.13's, outside the root) falls back to generic kernels on
    CPUs newer than itself; it gets the core scripts/openblas_coretype.sh names, so that both sides
    run sgemm kernels for this CPU (the root's newer OpenBLAS knows it)."""
    return {"OPENBLAS_CORETYPE": args.openblas_core} if side.startswith("megacpp-1.13") and args.openblas_core else {}


def measure(args, section, cfg, ranks=1, threads=1, fsdp="none", allocator="kept", sides=("megacpp", "pytorch"),
            iters=None, warmup=None):
    """One case: the sides run --repeats times, interleaved; recorded in args.cases and returned."""
    iters, warmup = iters or args.iters, args.warmup if warmup is None else warmup
    case = dict(section=section, cfg=cfg, ranks=ranks, threads=threads, fsdp=fsdp, allocator=allocator, iters=iters,
                warmup=warmup, load=[], runs={side: [] for side in sides},
                env={side: dict(ALLOCATOR_ENV[allocator][side], **blas_env(args, side)) for side in sides})
    parameters = {}
    for repeat in range(args.repeats):
        for side in sides:
            what = f"{side} {cfg} ranks={ranks} threads={threads} fsdp={fsdp} allocator={allocator} repeat {repeat + 1}"
            case["load"].append(os.getloadavg()[0])
            output, peak = execute(side_command(args, side, cfg, ranks, threads, fsdp, iters), what, case["env"][side])
            ms, parameters[side] = parse(output, what, warmup)
            case["runs"][side].append(dict(ms=ms, peak_mb=peak))
            print(f"bench: {what}: {ms:.1f} ms/iteration, {peak:.0f} MB", flush=True)
    if len(set(parameters.values())) != 1:
        sys.exit(f"bench: the models differ: {parameters} parameters")
    case["parameters"] = next(iter(parameters.values()))
    args.cases.append(case)
    return case


def section_a(args):  # one process, 1 and 2 threads, both allocator settings
    for threads in (1, 2):
        for allocator in ("kept", "glibc"):
            measure(args, "a", BASE, threads=threads, allocator=allocator)


def section_b(args):  # 2 ranks, FSDP2: one group, a group per layer
    for fsdp in ("root", "layers"):
        measure(args, "b", BASE, ranks=2, fsdp=fsdp)


def section_c(args):  # growth with hidden size and sequence length
    points = [dict(hidden=h, heads=h // 64, ffn=h * 688 // 256) for h in (128, 512)]
    points += [dict(seq=s) for s in (128, 1024)]
    for change in points:
        cfg = dict(BASE, **change)
        long = cfg["seq"] >= 1024 or cfg["hidden"] >= 512
        measure(args, "c", cfg, iters=min(args.iters, 8) if long else None, warmup=min(args.warmup, 2) if long else None)


def section_d(args):  # FSDP overhead: the runs of (a) and (b) against 2 ranks x 1 thread; measured here if absent
    have = {(c["section"], c["threads"], c["fsdp"], c["allocator"]) for c in args.cases}
    for threads in (1, 2):
        if ("a", threads, "none", "kept") not in have:
            measure(args, "a", BASE, threads=threads)
    if ("b", 1, "layers", "kept") not in have:
        measure(args, "b", BASE, ranks=2, fsdp="layers")


def section_e(args):  # peak memory per rank at 4 ranks (1 and 2 are in (a) and (b))
    measure(args, "e", BASE, ranks=4, fsdp="layers", iters=min(args.iters, 8), warmup=min(args.warmup, 2))


def section_g(args):  # megacpp on Debian's libtorch 1.13 against PyTorch 2.6
    for seq in (256, 1024):
        measure(args, "g", dict(BASE, seq=seq), sides=("megacpp-1.13", "pytorch"),
                iters=min(args.iters, 8) if seq >= 1024 else None, warmup=min(args.warmup, 2) if seq >= 1024 else None)


def section_i(args):  # the fused kernels: megacpp with them, without them (--no-kernel-fusion), and PyTorch
    for seq, ranks in ((256, 1), (1024, 1), (256, 2)):
        long = seq >= 1024
        measure(args, "i", dict(BASE, seq=seq), ranks=ranks, fsdp="layers" if ranks > 1 else "none",
                sides=("megacpp", "megacpp-unfused", "pytorch"), iters=min(args.iters, 8) if long else None,
                warmup=min(args.warmup, 2) if long else None)


def section_k(args):  # each fused kernel alone against its composition (megacpp-bench-kernels), on both libtorches
    for side in ("megacpp", "megacpp-1.13"):
        build = args.build if side == "megacpp" else args.build_113
        for seq in (256, 1024):
            command = [os.path.join(build, "megacpp-bench-kernels"), "--seq", str(seq), "--repeats", str(args.kernel_repeats)]
            load = os.getloadavg()[0]
            output, _ = execute(ROOT + command if side == "megacpp" else command, f"{side} kernels seq={seq}", blas_env(args, side))
            print(output, flush=True)
            args.cases.append(dict(section="k", side=side, seq=seq, load=[load], env={side: blas_env(args, side)},
                                   output=output.strip().splitlines()))


def section_l(args):  # tensor parallelism against FSDP2 on the same ranks (megacpp alone, libtorch 1.13)
    for ranks in (2, 4):
        measure(args, "l", BASE, ranks=ranks, fsdp="layers", sides=("megacpp-1.13", "megacpp-1.13-tp2"),
                iters=min(args.iters, 8), warmup=min(args.warmup, 2))


LONG = dict(BASE, seq=4096, batch=2)


def section_f(args):
    iters, warmup = min(args.iters, 5), min(args.warmup, 1)
    for ulysses in (1, 2):
        for tiles in (0, 4):
            path = os.path.join(args.scratch, f"long_{ulysses}_{tiles}.yaml")
            with open(path, "w") as f:
                f.write(f"sub_modules_to_wrap:\n  - layers.{{*}}\nulysses_size: {ulysses}\n")
                if tiles:
                    f.write(f"apply_tiled_mlp: true\ntiled_num_shards: {tiles}\n")
            command = megacpp_command(args, args.build_113, LONG, 2, 1, "root", iters) + ["--fsdp2-config-path", path]
            what = f"megacpp long sequence ulysses={ulysses} tiles={tiles}"
            load = os.getloadavg()[0]
            env = blas_env(args, "megacpp-1.13")
            output, peak = execute(command, what, env)
            ms, parameters = parse(output, what, warmup)
            args.cases.append(dict(section="f", cfg=LONG, ranks=2, threads=1, fsdp="layers", ulysses=ulysses, tiles=tiles,
                                   iters=iters, warmup=warmup, load=[load], parameters=parameters,
                                   runs={"megacpp-1.13": [dict(ms=ms, peak_mb=peak)]}, env={"megacpp-1.13": env}))


# (h) Scaling, one axis at a time from the base point (hidden 256, sequence 256): hidden sizes at
# sequence 256 and sequence lengths at hidden 256, each on 1, 2 and 4 ranks x 1 thread (FSDP2 with
# a group per layer above 1 rank), global batch 4. Two layers, so that the largest cases take
# minutes, not hours; fewer iterations where one takes seconds.
def scaling_points(args):
    base = dict(BASE, layers=2)
    points = [dict(base, hidden=h, heads=max(1, h // 64), ffn=h * BASE["ffn"] // BASE["hidden"]) for h in args.scaling_hidden]
    points += [dict(base, seq=s) for s in args.scaling_seq]
    unique = []
    for cfg in points:
        if cfg not in unique:
            unique.append(cfg)
    return unique


def section_h(args):
    for cfg in scaling_points(args):
        heavy = cfg["seq"] >= 4096 or cfg["hidden"] >= 1024
        long = heavy or cfg["seq"] >= 1024 or cfg["hidden"] >= 512
        iters = min(args.iters, 4 if heavy else 6 if long else 8)
        warmup = min(args.warmup, 1 if long else 2)
        for ranks in args.scaling_ranks:
            measure(args, "h", cfg, ranks=ranks, fsdp="layers" if ranks > 1 else "none", iters=iters, warmup=warmup)


def settings(args):
    """What a reader needs to rerun it: the machine, the builds, the software of both sides."""
    def text(command):
        return subprocess.run(command, capture_output=True, text=True, cwd=REPO).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    torch = text(ROOT + ["python3", "-c", "import torch; print(torch.__version__)"]) if set(args.sections) - {"f", "l"} else ""
    return dict(date=datetime.date.today().isoformat(), commit=text(["git", "rev-parse", "--short", "HEAD"]),
                cores=os.cpu_count(), cpu=cpu, pytorch=torch, build=args.build, build_113=args.build_113,
                iters=args.iters, warmup=args.warmup, repeats=args.repeats, model=BASE, sections=args.sections,
                openblas_core_113=args.openblas_core,
                command=os.environ.get("MEGACPP_BENCH_COMMAND", "python3 bench/bench.py " + " ".join(sys.argv[1:])))


def main():
    parser = argparse.ArgumentParser(description="megacpp against PyTorch 2.x eager, side by side")
    parser.add_argument("--build", default=os.path.join(REPO, "build-pytorch2"),
                        help="megacpp built against the root's libtorch 2.6 (default build-pytorch2)")
    parser.add_argument("--build-113", default=os.path.join(REPO, "build"),
                        help="megacpp built against Debian's libtorch 1.13, run on this machine (default build)")
    parser.add_argument("--sections", default="abcdefgik")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iters", type=int, default=13)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--kernel-repeats", type=int, default=15, help="section k's interleaved runs of each kernel")
    parser.add_argument("--json", default=os.path.join(REPO, "bench", "results.json"))
    numbers = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    parser.add_argument("--scaling-hidden", type=numbers, default=[128, 256, 512, 1024], help="section h's hidden sizes")
    parser.add_argument("--scaling-seq", type=numbers, default=[64, 256, 1024, 4096], help="section h's sequence lengths")
    parser.add_argument("--scaling-ranks", type=numbers, default=[1, 2, 4], help="section h's rank counts")
    args = parser.parse_args()
    args.build, args.build_113 = os.path.abspath(args.build), os.path.abspath(args.build_113)
    args.openblas_core = subprocess.run(["bash", os.path.join(REPO, "scripts", "openblas_coretype.sh")], capture_output=True,
                                        text=True, check=True).stdout.strip()
    args.cases = []
    results = dict(settings=settings(args), cases=args.cases)
    print(f"bench: {json.dumps(results['settings'])}", flush=True)
    with tempfile.TemporaryDirectory(dir=REPO, prefix=".bench-") as scratch:  # inside the checkout: the root sees it
        args.scratch = scratch
        args.layers_yaml = os.path.join(scratch, "layers.yaml")
        with open(args.layers_yaml, "w") as f:
            # PyTorch 2.6's fully_shard fails on the CPU when it re-gathers a group for backward
            # (the gather bumps the version of tensors autograd saved): both sides keep groups
            # gathered from forward to backward.
            f.write("sub_modules_to_wrap:\n  - layers.{*}\nreshard_after_forward: false\n")
        for name in args.sections:
            globals()["section_" + name](args)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    print(f"bench: results in {args.json} (python3 bench/report.py {args.json} renders them)")


if __name__ == "__main__":
    main()
