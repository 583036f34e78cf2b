"""The runs of the GPU check (scripts/gpu_check.sh builds megacpp, then runs this).

Correctness, a small Llama for 20 iterations through the whole engine (megacpp-run, FSDP2 with a
group per layer, one rank: NCCL refuses two ranks on one GPU, and megacpp makes no process group
for one rank, so no collective runs), every logged loss compared:
  bf16 on the GPU                 against fp32 on the CPU (CUDA_VISIBLE_DEVICES= hides the GPU)        2e-2
  fp32 on the GPU                 against fp32 on the CPU                                              1e-4
  fp32 with CPU offload           against fp32 on the GPU (offload_to_cpu: shards, gradients and
                                  optimizer state in pinned host memory)                               1e-4
  fp32 with full recompute        against fp32 on the GPU                                              1e-4
  fp32 initialized on the meta device against fp32 on the GPU                                          1e-4
  fp32 on one stream (MEGACPP_FSDP_STREAMS=0) against fp32 on the GPU (side streams)                1e-4
Speed, side by side in this run: megacpp-train (FSDP2's side streams, Note [Streams]), megacpp-train
on one stream, and PyTorch's own fully_shard (bench/pytorch_llama.py: eager, SDPA, bf16
MixedPrecisionPolicy, the same Llama, AdamW, clipping), each run --repeats times, alternating;
time per iteration is the median after --warmup iterations; tokens/s and TFLOP/s come from it
with megacpp's FLOPs per token for all; peak memory is the allocator's peak over the whole run
(megacpp's last memory line, PyTorch's torch.cuda.max_memory_allocated at the end). Then the same
model with CPU offload, megacpp with side streams against one stream (--offload-iters): with one
GPU there is no collective to overlap, but the host-device copies of shards and gradients are.

  python3 bench/gpu_check.py --build build-gpu --out DIR [--peak-tflops N] [--dry-run] [--reuse-logs]

Writes DIR/gpu_check.json (every figure) and DIR/gpu_check.md (the tables for
docs/performance.md). --dry-run (no GPU) does what the CPU can: the CPU runs and their comparisons,
and says which runs it skipped. Exits 1 if a run or a comparison fails.
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
LOSS_RE = re.compile(r"\| lm loss: ([0-9.E+-]+)")
TOKENS_RE = re.compile(r"tokens per iteration (\d+)")
TIME_RE = re.compile(r"elapsed time per iteration \(ms\): ([0-9.]+)")
FLOPS_RE = re.compile(r"model \w+: (\d+) parameters, ([0-9.e+-]+) training FLOPs/token")
DEVICE_RE = re.compile(r"\| device (\w+)")
PARAMS_RE = re.compile(r"model \w+: (\d+) parameters")
MEGACPP_PEAK_RE = re.compile(r"\[rank 0\] memory \(MB\) .*\| peak: ([0-9.]+)")
PYTORCH_PEAK_RE = re.compile(r"peak GPU memory allocated ([0-9.]+) MiB")

RECOMPUTE = ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", 1]
# The flags of the model's shape and the batch, as both megacpp-train and pytorch_llama.py take them.
SHAPE_FLAGS = [("num-layers", "layers"), ("hidden-size", "hidden"), ("num-attention-heads", "heads"),
               ("num-query-groups", "groups"), ("ffn-hidden-size", "ffn"), ("seq-length", "seq"),
               ("micro-batch-size", "micro"), ("global-batch-size", "batch"), ("train-iters", "iters")]
SMALL = dict(layers=4, hidden=256, heads=4, groups=4, ffn=688, seq=256, vocab=8192, micro=1, batch=8, iters=20, lr=1e-3)


def shape_flags(m):
    return [value for flag, key in SHAPE_FLAGS for value in ("--" + flag, m[key])]


def model_flags(m):
    """megacpp-train's flags for model `m`. NullTokenizer adds one token (end of document)."""
    return shape_flags(m) + ["--max-position-embeddings", m["seq"], "--vocab-size", m["vocab"] - 1, "--lr", m["lr"],
                             "--seed", 1234]


class RunFailed(Exception):
    pass


class Check:
    def __init__(self, args):
        self.args = args
        self.scratch = tempfile.mkdtemp(prefix="gpu_check.")
        self.results = {"date": datetime.date.today().isoformat(), "runs": {}, "comparisons": [], "skipped": [], "failures": [],
                        "speed": []}
        self.layers_yaml = self.yaml("layers.yaml", "sub_modules_to_wrap:\n  - layers.{*}\n")
        self.offload_yaml = self.yaml("offload.yaml", "sub_modules_to_wrap:\n  - layers.{*}\noffload_to_cpu: true\n")

    def yaml(self, name, text):
        path = os.path.join(self.scratch, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def execute(self, name, command, env=None):
        log = os.path.join(self.args.out, name + ".log")
        if self.args.reuse_logs:
            if not os.path.exists(log):
                raise RunFailed(f"--reuse-logs: no {log}")
            return open(log).read()
        with open(log, "w") as f:
            try:
                code = subprocess.run([str(c) for c in command], stdout=f, stderr=subprocess.STDOUT,
                                      env=dict(os.environ, **(env or {})), timeout=self.args.run_timeout).returncode
            except subprocess.TimeoutExpired:
                code = f"killed after --run-timeout {self.args.run_timeout} s"
        output = open(log).read()
        if code != 0:
            raise RunFailed(f"run '{name}' failed ({code}); the end of {log}:\n{output[-3000:]}")
        return output

    def megacpp(self, name, model, extra, config=None, env=None):
        command = [os.path.join(self.args.build, "megacpp-run"), "--nproc-per-node", 1, "--master-port", 0,
                   os.path.join(self.args.build, "megacpp-train"), "--model-type", "llama", "--mock-data",
                   "--tokenizer-type", "NullTokenizer", "--make-vocab-size-divisible-by", 1, "--use-torch-fsdp2",
                   "--fsdp2-config-path", config or self.layers_yaml, "--log-interval", 1, "--eval-iters", 0]
        output = self.execute(name, command + model_flags(model) + extra, env)
        device = DEVICE_RE.search(output)
        expected = "cpu" if self.args.dry_run or (env or {}).get("CUDA_VISIBLE_DEVICES") == "" else "cuda"
        if not device or device.group(1) != expected:
            raise RunFailed(f"run '{name}' trained on {device.group(1) if device else 'an unnamed device'}, not {expected}")
        if expected == "cuda":
            streams = "one (MEGACPP_FSDP_STREAMS=0)" if (env or {}).get("MEGACPP_FSDP_STREAMS") == "0" else "side streams"
            said = next((line for line in output.splitlines() if "fsdp2: streams: " in line), "")
            if streams not in said:
                raise RunFailed(f"run '{name}' does not say it ran on {streams} ('fsdp2: streams: ...')")
        losses = [float(x) for x in LOSS_RE.findall(output)]
        if len(losses) != model["iters"]:
            raise RunFailed(f"run '{name}': expected {model['iters']} losses, found {len(losses)}")
        self.results["runs"][name] = {"losses": losses}
        print(f"gpu_check: {name}: losses {losses[0]:.4f} .. {losses[-1]:.4f}", flush=True)
        return output

    def step(self, what, function, *args):
        """Runs one step; a failure is reported and recorded, and the check goes on with the next."""
        try:
            return function(*args)
        except RunFailed as failure:
            self.results["failures"].append(f"{what}: {failure}")
            print(f"gpu_check: FAILED: {what}: {failure}", flush=True)

    def compare(self, name, reference, limit):
        if name not in self.results["runs"] or reference not in self.results["runs"]:
            return self.results["failures"].append(f"{name} against {reference}: not compared (a run failed)")
        a, b = self.results["runs"][name]["losses"], self.results["runs"][reference]["losses"]
        worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
        ok = worst <= limit
        self.results["comparisons"].append({"run": name, "against": reference, "largest_relative_difference": worst,
                                            "limit": limit, "ok": ok})
        print(f"gpu_check: {name} against {reference}: largest relative difference of the losses {worst:.2e} "
              f"(limit {limit:g}) {'ok' if ok else 'FAILED'}", flush=True)

    def skip(self, what):
        self.results["skipped"].append(what)
        print(f"gpu_check: skipped: {what}", flush=True)

    def correctness(self):
        on_cpu = {"CUDA_VISIBLE_DEVICES": ""}
        run = lambda name, extra, **kw: self.step(name, self.megacpp, name, SMALL, extra, kw.get("config"), kw.get("env"))
        run("cpu_fp32", [], env=on_cpu)
        if self.args.dry_run:
            run("cpu_fp32_recompute", RECOMPUTE, env=on_cpu)
            self.compare("cpu_fp32_recompute", "cpu_fp32", 1e-4)
            run("cpu_fp32_meta_init", ["--init-model-with-meta-device"], env=on_cpu)
            self.compare("cpu_fp32_meta_init", "cpu_fp32", 1e-4)
            for what in ["gpu_bf16", "gpu_fp32", "gpu_fp32_offload", "gpu_fp32_recompute", "gpu_fp32_meta_init",
                         "gpu_fp32_one_stream"]:
                self.skip(what + " (--dry-run: no GPU)")
            return
        run("gpu_bf16", ["--bf16"])
        self.compare("gpu_bf16", "cpu_fp32", 2e-2)
        run("gpu_fp32", [])
        self.compare("gpu_fp32", "cpu_fp32", 1e-4)
        output = run("gpu_fp32_offload", [], config=self.offload_yaml)
        if output is not None and "fsdp2: CPU offload" not in output:
            self.results["failures"].append("the offload run did not say it offloaded ('fsdp2: CPU offload' missing)")
        self.compare("gpu_fp32_offload", "gpu_fp32", 1e-4)
        run("gpu_fp32_recompute", RECOMPUTE)
        self.compare("gpu_fp32_recompute", "gpu_fp32", 1e-4)
        run("gpu_fp32_meta_init", ["--init-model-with-meta-device"])
        self.compare("gpu_fp32_meta_init", "gpu_fp32", 1e-4)
        run("gpu_fp32_one_stream", [], env={"MEGACPP_FSDP_STREAMS": "0"})
        self.compare("gpu_fp32_one_stream", "gpu_fp32", 1e-4)

    def speed_model(self):
        a = self.args
        model = dict(layers=a.layers, hidden=a.hidden, heads=a.heads, groups=a.groups, ffn=a.ffn, seq=a.seq,
                     vocab=a.vocab, micro=a.micro, batch=a.batch, iters=a.iters, lr=1e-4)
        if a.dry_run:
            model.update(layers=2, hidden=128, heads=4, groups=2, ffn=344, seq=128, vocab=1024, micro=1, batch=2, iters=a.warmup + 2)
        return model

    def speed(self):
        """megacpp (side streams), megacpp on one stream (MEGACPP_FSDP_STREAMS=0) and PyTorch, alternating."""
        a = self.args
        model = self.speed_model()
        pytorch = [sys.executable, os.path.join(HERE, "pytorch_llama.py"), "--fsdp", "layers",
                   "--device", "cpu" if a.dry_run else "cuda"] + ([] if a.dry_run else ["--bf16"])
        pytorch += shape_flags(model) + ["--vocab-size", model["vocab"]]
        sides = [("megacpp", {}, None)]
        if a.dry_run:
            self.skip("megacpp on one stream (--dry-run: the CPU has no streams)")
        else:
            sides.append(("megacpp_one_stream", {"MEGACPP_FSDP_STREAMS": "0"}, None))
        if a.reuse_logs or has_fully_shard():
            sides.append(("pytorch", {}, pytorch))
        else:
            self.skip(f"the PyTorch side ({sys.executable} has no torch.distributed.fsdp.fully_shard)")
        self.measure("speed", model, sides, a.warmup)
        if len({r["parameters"] for r in self.results["speed"]}) != 1:
            raise RunFailed("megacpp and PyTorch built models of different sizes: "
                            f"{sorted({r['parameters'] for r in self.results['speed']})}")

    def offload_speed(self):
        """megacpp with CPU offload, side streams against one stream, alternating: the host-device copies
        of the shards and gradients are what the copy-in and reduce-scatter streams can overlap on one GPU."""
        a = self.args
        if a.dry_run:
            return self.skip("offload speed (--dry-run: offload needs a GPU)")
        model = dict(self.speed_model(), iters=a.offload_iters)
        sides = [("megacpp", {}, None), ("megacpp_one_stream", {"MEGACPP_FSDP_STREAMS": "0"}, None)]
        self.measure("offload_speed", model, sides, a.offload_warmup, config=self.offload_yaml)

    def measure(self, section, model, sides, warmup, config=None):
        """Runs each side --repeats times, alternating; a side is (name, environment, PyTorch command or None)."""
        a = self.args
        device = [] if a.dry_run else ["--bf16", "--peak-tflops", a.peak_tflops]
        tokens = model["batch"] * model["seq"]
        cpu_only = {"CUDA_VISIBLE_DEVICES": ""} if a.dry_run else {}
        rows, flops = [], None
        for repeat in range(1, a.repeats + 1):
            for side, env, pytorch in sides:
                name = f"{section}_{side}_{repeat}"
                if pytorch is None:
                    output = self.megacpp(name, model, device, config=config, env=dict(cpu_only, **env))
                    found = FLOPS_RE.search(output)
                    if not found:
                        raise RunFailed(f"{name}: no 'training FLOPs/token' in its log")
                    flops = float(found.group(2))
                    rows.append((side, repeat, self.timing(output, MEGACPP_PEAK_RE, warmup)))
                    continue
                launcher = [os.path.join(a.build, "megacpp-run"), "--nproc-per-node", 1, "--master-port", 0]
                output = self.execute(name, launcher + pytorch, dict(cpu_only, **env))
                found = TOKENS_RE.search(output)
                if not found or int(found.group(1)) != tokens:
                    raise RunFailed(f"{name} trained {found.group(1) if found else 'an unknown number of'} "
                                    f"tokens per iteration, not {tokens} (other --batch or --seq?)")
                rows.append((side, repeat, self.timing(output, PYTORCH_PEAK_RE, warmup)))
        self.results[section] = []
        for side, repeat, run in rows:
            tokens_per_s = tokens / (run["ms"] / 1000.0)
            tflops = tokens_per_s * flops / 1e12
            self.results[section].append(dict(
                side=side, repeat=repeat, ms=run["ms"], tokens_per_s=tokens_per_s, tflops=tflops,
                mfu=tflops / a.peak_tflops if a.peak_tflops > 0 else None, peak_mib=run["peak"],
                parameters=run["parameters"], model=model, warmup=warmup, config="offload" if config else "layers"))

    def timing(self, output, peak_re, warmup):
        times = [float(t) for t in TIME_RE.findall(output)][warmup:]
        peaks = peak_re.findall(output)  # the last: megacpp's first line predates the optimizer state
        parameters = PARAMS_RE.search(output)
        if not times or not parameters:
            raise RunFailed("a speed run's log has no iteration times after the warm-up, or no parameter count")
        return {"ms": statistics.median(times), "peak": float(peaks[-1]) if peaks else None,
                "parameters": int(parameters.group(1))}

    def speed_table(self, runs):
        m, sides = runs[0]["model"], list(dict.fromkeys(s["side"] for s in runs))
        lines = [f"Llama {runs[0]['parameters'] / 1e9:.2f} B parameters ({m['layers']} layers, hidden "
                 f"{m['hidden']}, {m['heads']} heads, {m['groups']} query groups, FFN {m['ffn']}, vocabulary "
                 f"{m['vocab']}), sequence {m['seq']}, micro-batch {m['micro']}, global batch {m['batch']}; median "
                 f"ms per iteration after {runs[0]['warmup']} warm-up iterations of {m['iters']}"
                 + (f", runs in the order {', '.join(sides)}, {sides[0]}, ..." if len(sides) > 1 else ""), "",
                 "| side | run | ms/iteration | tokens/s | TFLOP/s | MFU | peak allocated (MiB) |",
                 "|---|---|---|---|---|---|---|"]
        for s in runs:
            mfu = f"{100 * s['mfu']:.1f}%" if s["mfu"] is not None else "-"
            peak = f"{s['peak_mib']:.0f}" if s["peak_mib"] is not None else "-"
            lines.append(f"| {s['side']} | {s['repeat']} | {s['ms']:.1f} | {s['tokens_per_s']:.0f} | "
                         f"{s['tflops']:.1f} | {mfu} | {peak} |")
        mean = {side: statistics.mean(s["tokens_per_s"] for s in runs if s["side"] == side) for side in sides}
        for side in sides[1:]:
            ratio = mean["megacpp"] / mean[side]
            self.results[f"{runs[0]['config']}_megacpp_over_{side}_tokens_per_s"] = ratio
            lines += ["", f"megacpp's tokens/s / {side}'s (means of the runs): {ratio:.3f}"]
        return lines

    def report(self):
        r = self.results
        lines = [f"{r.get('device', 'no GPU (dry run)')}, {r['date']}; {r.get('software', '')}"]
        if r["comparisons"]:
            lines += ["", "| run | against | largest relative loss difference | limit | |", "|---|---|---|---|---|"]
        for c in r["comparisons"]:
            lines.append(f"| {c['run']} | {c['against']} | {c['largest_relative_difference']:.2e} | {c['limit']:g} | "
                         f"{'ok' if c['ok'] else 'FAILED'} |")
        for section, title in [("speed", "Speed"), ("offload_speed", "Speed with CPU offload (`offload_to_cpu`)")]:
            if r.get(section):
                lines += ["", f"{title}:", ""] + self.speed_table(r[section])
        if r["failures"]:
            lines += ["", "Failed: " + "; ".join(f.splitlines()[0] for f in r["failures"])]
        if r["skipped"]:
            lines += ["", "Skipped: " + "; ".join(r["skipped"])]
        text = "\n".join(lines) + "\n"
        with open(os.path.join(self.args.out, "gpu_check.md"), "w") as f:
            f.write(text)
        with open(os.path.join(self.args.out, "gpu_check.json"), "w") as f:
            json.dump(r, f, indent=1)
        print(text, flush=True)


def has_fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401 (PyTorch 2.6+)
        return True
    except ImportError:
        return False


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build-gpu")
    p.add_argument("--out", required=True, help="where the logs, gpu_check.json and gpu_check.md go")
    p.add_argument("--peak-tflops", type=float, default=0.0, help="the device's dense bf16 peak, for MFU")
    p.add_argument("--dry-run", action="store_true", help="no GPU: the CPU runs only, and a tiny speed run")
    p.add_argument("--sections", default="cso", help="c: correctness, s: speed, o: speed with CPU offload")
    p.add_argument("--device-name", default="", help="the card's name, for the report")
    p.add_argument("--reuse-logs", action="store_true",
                   help="run nothing: read the logs an earlier run left in --out and report them again")
    p.add_argument("--run-timeout", type=int, default=240, help="seconds after which a run is killed and counted failed")
    for name, default in [("layers", 16), ("hidden", 2048), ("heads", 16), ("groups", 8), ("ffn", 5632),
                          ("seq", 4096), ("vocab", 32000), ("micro", 4), ("batch", 8), ("iters", 15),
                          ("warmup", 5), ("repeats", 2), ("offload-iters", 8), ("offload-warmup", 3)]:
        p.add_argument("--" + name, type=int, default=default)
    args = p.parse_args()
    for iters, warmup in [("iters", "warmup"), ("offload_iters", "offload_warmup")]:
        if getattr(args, iters) <= getattr(args, warmup):
            p.error(f"--{iters} {getattr(args, iters)} leaves no iteration after --{warmup} {getattr(args, warmup)}")
    os.makedirs(args.out, exist_ok=True)
    check = Check(args)
    if args.device_name:
        check.results["device"] = args.device_name
    earlier = os.path.join(args.out, "gpu_check.json")
    if args.reuse_logs and os.path.exists(earlier):
        check.results.update({k: v for k, v in json.load(open(earlier)).items() if k in ("date", "device", "software")})
    else:
        try:
            import torch
            check.results["software"] = f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}"
        except ImportError:
            pass
    if "c" in args.sections:
        check.correctness()
    if "s" in args.sections:
        check.step("speed", check.speed)
    if "o" in args.sections:
        check.step("offload speed", check.offload_speed)
    check.report()
    if check.results["failures"] or not all(c["ok"] for c in check.results["comparisons"]):
        sys.exit("gpu_check: a run or a comparison failed (above)")


if __name__ == "__main__":
    main()
