"""docs/performance.md's benchmark tables from bench/bench.py's JSON (nothing copied by hand).

  python3 bench/report.py RESULTS.json                    # the tables, as Markdown, on stdout
  python3 bench/report.py RESULTS.json --docs docs/performance.md
                                                          # replaces the block between the markers
  python3 bench/report.py bench/scaling.json --docs docs/performance.md --plot docs/scaling.png
                                                          # the scaling grid (section h): its own
                                                          # block, and its ratios drawn (matplotlib)
  python3 bench/report.py bench/tensor_parallel.json --docs docs/performance.md
                                                          # tensor parallelism (section l): its own block

Times are median ms per iteration over a case's repeats, with (min-max) of the repeats; a ratio
is megacpp's median / PyTorch's median, with (min-max) of the per-pair ratios (repeat i of one
side against repeat i of the other, which ran next to it). Peak RSS (MB) is the median of the
repeats' peaks of the largest rank. "load" is the highest 1-minute load average seen before a
run of the case (2 cores: about 1 per busy core, the benchmark's own included).
"""
import argparse
import json
import statistics
import sys

BEGIN = "<!-- bench/report.py: generated from bench/bench.py's JSON; do not edit by hand -->"
END = "<!-- bench/report.py: end -->"
SCALING_BEGIN = "<!-- bench/report.py: the scaling grid, generated from bench/scaling.json; do not edit by hand -->"
SCALING_END = "<!-- bench/report.py: end of the scaling grid -->"
TP_BEGIN = "<!-- bench/report.py: tensor parallelism, generated from bench/tensor_parallel.json; do not edit by hand -->"
TP_END = "<!-- bench/report.py: end of tensor parallelism -->"


def only_section(results, name):
    return bool(results["cases"]) and all(c["section"] == name for c in results["cases"])


def is_scaling(results):
    return only_section(results, "h")


def markers(results):
    if is_scaling(results):
        return SCALING_BEGIN, SCALING_END
    return (TP_BEGIN, TP_END) if only_section(results, "l") else (BEGIN, END)


def spread(values, digits=1):
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def times(case, side):
    return [run["ms"] for run in case["runs"][side]]


def peak(case, side):
    return statistics.median(run["peak_mb"] for run in case["runs"][side])


def ratio(case, a, b):
    """megacpp / PyTorch: of the medians, with the range of the per-pair ratios."""
    pairs = [x / y for x, y in zip(times(case, a), times(case, b))]
    return f"{statistics.median(times(case, a)) / statistics.median(times(case, b)):.2f} ({min(pairs):.2f}–{max(pairs):.2f})"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def find(cases, **match):
    return [c for c in cases if all(c.get(k) == v for k, v in match.items())]


def one(cases, **match):
    found = find(cases, **match)
    return found[0] if found else None


def side_by_side(cases, label, a="megacpp", b="pytorch"):
    rows = []
    for case in cases:
        rows.append(label(case) + [spread(times(case, a)), spread(times(case, b)), ratio(case, a, b),
                                   f"{peak(case, a):.0f}", f"{peak(case, b):.0f}", f"{peak(case, a) / peak(case, b):.2f}",
                                   f"{max(case['load']):.1f}"])
    return rows


SIDE_COLUMNS = ["{a} ms", "{b} ms", "time ratio", "{a} MB", "{b} MB", "MB ratio", "load"]


def columns(a="megacpp", b="pytorch"):
    return [c.format(a=a, b=b) for c in SIDE_COLUMNS]


def overhead(cases):
    rows = []
    for side in ("megacpp", "pytorch"):
        one_1 = one(cases, section="a", threads=1, allocator="kept")
        one_2 = one(cases, section="a", threads=2, allocator="kept")
        two = one(cases, section="b", fsdp="layers")
        if not (one_1 and one_2 and two):
            return None
        m1, m2, m = (statistics.median(times(c, side)) for c in (one_1, one_2, two))
        rows.append([side, f"{m1:.1f}", f"{m2:.1f}", f"{m:.1f}", f"{m / m2:.2f}", f"{m / m1:.2f}"])
    return table(["", "1 rank x 1 thread ms", "1 rank x 2 threads ms", "2 ranks x 1 thread ms", "2 ranks / (1 x 2)",
                  "2 ranks / (1 x 1)"], rows)


def memory(cases):
    rows = []
    for ranks, case in ((1, one(cases, section="a", threads=1, allocator="kept")), (2, one(cases, section="b", fsdp="layers")),
                        (4, one(cases, section="e"))):
        if case:
            rows.append([ranks, f"{peak(case, 'megacpp'):.0f}", f"{peak(case, 'pytorch'):.0f}",
                         f"{peak(case, 'megacpp') / peak(case, 'pytorch'):.2f}"])
    return table(["ranks", "megacpp MB/rank", "pytorch MB/rank", "ratio"], rows) if rows else None


def scaling_axis(case, base):
    """'hidden' or 'seq': the axis a grid point lies on ('base' for the point both share)."""
    cfg = case["cfg"]
    if cfg["hidden"] == base["hidden"] and cfg["seq"] == base["seq"]:
        return "base"
    return "hidden" if cfg["seq"] == base["seq"] else "seq"


def render_scaling(results):
    s, cases = results["settings"], results["cases"]
    base = s["model"]
    layers = cases[0]["cfg"]["layers"]
    rows = side_by_side(cases, lambda c: [c["cfg"]["hidden"], c["cfg"]["seq"], c["ranks"], c["parameters"], c["iters"]])
    return "\n".join([
        SCALING_BEGIN, "",
        f"Measured on {s['date']} at commit `{s['commit']}` on {s['cores']} cores ({s['cpu']}), by `{s['command']}`: "
        f"megacpp built against the PyTorch 2.6 root's libtorch and PyTorch {s['pytorch']} eager in that root, "
        f"{s['repeats']} run(s) of each side per point, interleaved; the median time per iteration after the warm-up. "
        f"Llama with {layers} layers, hidden sizes at sequence {base['seq']} and sequences at hidden {base['hidden']} "
        f"(heads hidden/64, FFN hidden x {base['ffn']}/{base['hidden']}), vocabulary {base['vocab']}, global batch "
        f"{base['batch']} (micro-batch 1), fp32, AdamW; 1 thread per rank; above 1 rank FSDP2 with a group per layer "
        "on both sides; allocator `kept`. Ratios are megacpp / PyTorch; docs/scaling.png draws them.", "",
        table(["hidden", "seq", "ranks", "parameters", "iterations"] + columns(), rows), "",
        "![megacpp / PyTorch 2.6 along each axis: time per iteration and peak RSS per rank](scaling.png)", "",
        SCALING_END])


def plot_scaling(results, path):
    """The time and peak-memory ratios along each axis, a line per rank count."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    cases, base = results["cases"], results["settings"]["model"]
    figure, panels = plt.subplots(2, 2, figsize=(10, 7), sharey="row")
    for column, axis in enumerate(("hidden", "seq")):
        for ranks in sorted({c["ranks"] for c in cases}):
            points = sorted((c["cfg"][axis], c) for c in cases
                            if c["ranks"] == ranks and scaling_axis(c, base) in (axis, "base"))
            xs = [x for x, _ in points]
            time_ratios = [statistics.median(times(c, "megacpp")) / statistics.median(times(c, "pytorch")) for _, c in points]
            memory_ratios = [peak(c, "megacpp") / peak(c, "pytorch") for _, c in points]
            panels[0][column].plot(xs, time_ratios, marker="o", label=f"{ranks} rank{'s' if ranks > 1 else ''}")
            panels[1][column].plot(xs, memory_ratios, marker="o", label=f"{ranks} rank{'s' if ranks > 1 else ''}")
        for row, what in enumerate(("time per iteration", "peak RSS per rank")):
            panel = panels[row][column]
            panel.set_xscale("log", base=2)
            panel.set_xticks(sorted({c["cfg"][axis] for c in cases}))
            panel.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            panel.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            panel.axhline(1.0, color="gray", linewidth=0.8)
            panel.axhline(0.8, color="gray", linewidth=0.8, linestyle="--")
            panel.set_xlabel(f"hidden size (sequence {base['seq']})" if axis == "hidden"
                             else f"sequence length (hidden {base['hidden']})")
            panel.set_ylabel(f"megacpp / PyTorch, {what}")
            panel.legend()
    figure.suptitle("megacpp / PyTorch 2.6 eager, like for like (bench/scaling.json); dashed: 0.8")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def render_tensor_parallel(results):
    s, cases = results["settings"], results["cases"]
    rows = []
    for c in cases:
        tp = "TP 2" if c["ranks"] == 2 else "TP 2 x FSDP 2"
        rows.append([c["ranks"], f"FSDP {c['ranks']}", tp] + side_by_side([c], lambda _: [], "megacpp-1.13-tp2", "megacpp-1.13")[0])
    header = ["ranks", "against", "layout"] + columns("TP", "FSDP")
    return "\n".join([
        TP_BEGIN, "",
        f"Measured on {s['date']} at commit `{s['commit']}` on {s['cores']} cores ({s['cpu']}), by `{s['command']}`: "
        f"megacpp built against Debian's libtorch 1.13 (`{s['build_113'].split('/')[-1]}/`), 1 thread per rank, Gloo; "
        "Llama, {layers} layers, hidden {hidden}, {heads} heads, FFN {ffn}, sequence {seq}, vocabulary {vocab}, global "
        "batch {batch} (micro-batch 1), fp32, AdamW, an FSDP2 group per layer kept gathered from forward to backward. "
        "Each layout ran {repeats} times, interleaved with the other; the median of each run's iterations after the "
        "warm-up. TP splits every layer and the vocabulary over 2 ranks and all-reduces activations in each block; "
        "FSDP gathers each layer's parameters and reduce-scatters its gradients: the layouts' communication differs "
        "by design. A ratio below 1: TP is faster or smaller.".format(repeats=s["repeats"], **s["model"]), "",
        table(header, rows), "", TP_END])


def render(results):
    if is_scaling(results):
        return render_scaling(results)
    if only_section(results, "l"):
        return render_tensor_parallel(results)
    s, cases = results["settings"], results["cases"]
    out = [BEGIN, "",
           f"Measured on {s['date']} at commit `{s['commit']}` on {s['cores']} cores ({s['cpu']}), by "
           f"`{s['command']}`: megacpp built against the PyTorch 2.6 root's libtorch (`{s['build'].split('/')[-1]}/`) "
           f"and PyTorch {s['pytorch']} eager in that root; {s['iters']} iterations per run (fewer for the longest "
           f"cases), the median after {s['warmup']} warm-up; {s['repeats']} runs of each side per case, interleaved. "
           "Model: Llama, {layers} layers, hidden {hidden}, {heads} heads, FFN {ffn}, sequence {seq}, vocabulary "
           "{vocab}, global batch {batch} (micro-batch 1), fp32, AdamW, clipping at 1.0.".format(**s["model"]), ""]
    kept = one(cases, section="a", allocator="kept")
    kept_env = " ".join(f"{k}={v}" for k, v in sorted(kept["env"]["pytorch"].items())) if kept else "?"
    sections = [
        (f"(a) One process, no sharding. `kept`: both keep freed memory (PyTorch with `{kept_env}`, the glibc "
         "settings megacpp-train applies to itself; megacpp's host caching allocator for tensors of 1 MiB and more has no "
         "PyTorch counterpart on the CPU); `glibc`: both with libtorch's allocator and glibc's defaults (megacpp with "
         "`MEGACPP_KEEP_HOST_MEMORY=0`).",
         ["threads", "allocator"], lambda c: [c["threads"], c["allocator"]], find(cases, section="a")),
        ("(b) 2 ranks x 1 thread, FSDP2 on Gloo: megacpp `--use-torch-fsdp2` against `fully_shard`, one group (the "
         "root) or a group per decoder layer; both reduce-scatter once per iteration and keep groups gathered from "
         "forward to backward; allocator `kept`.", ["groups"], lambda c: [c["fsdp"]], find(cases, section="b")),
        ("(c) Growth with hidden size and sequence length (one process, 1 thread, `kept`).",
         ["hidden", "seq", "parameters"], lambda c: [c["cfg"]["hidden"], c["cfg"]["seq"], c["parameters"]],
         find(cases, section="c")),
    ]
    for title, label_header, label, chosen in sections:
        if chosen:
            out += [title, "", table(label_header + columns(), side_by_side(chosen, label)), ""]
    text = overhead(cases)
    if text:
        out += ["(d) FSDP overhead: 2 ranks x 1 thread (a group per layer) against 1 rank on the same global batch, "
                "from the `kept` runs of (a) and (b).", "", text, ""]
    text = memory(cases)
    if text:
        out += ["(e) Peak memory per rank (FSDP2 with a group per layer above 1 rank; `kept`).", "", text, ""]
    chosen = find(cases, section="g")
    if chosen:
        core = s.get("openblas_core_113")
        blas = (f" megacpp-1.13 runs with `OPENBLAS_CORETYPE={core}`: bookworm's OpenBLAS does not know this CPU and would "
                "fall back to its generic kernels (`scripts/openblas_coretype.sh`)." if core else "")
        out += ["(g) megacpp built against Debian's libtorch 1.13 (`build/`; no SDPA there: its own blocked attention with an "
                "online softmax) against PyTorch 2.6 eager (SDPA); one process, 1 thread, `kept`." + blas, "",
                table(["seq"] + columns("megacpp-1.13"),
                      side_by_side(chosen, lambda c: [c["cfg"]["seq"]], "megacpp-1.13")), ""]
    chosen = find(cases, section="i")
    if chosen:
        rows = [[c["ranks"], c["cfg"]["seq"], spread(times(c, "megacpp")), spread(times(c, "megacpp-unfused")),
                 spread(times(c, "pytorch")), ratio(c, "megacpp", "megacpp-unfused"), ratio(c, "megacpp", "pytorch"),
                 f"{peak(c, 'megacpp'):.0f}", f"{peak(c, 'megacpp-unfused'):.0f}", f"{max(c['load']):.1f}"] for c in chosen]
        out += ["(i) The fused CPU kernels (RMSNorm, rotary, SwiGLU, cross-entropy, AdamW; Note [Fused kernels]): "
                "megacpp with them, megacpp with libtorch's composition instead (`--no-kernel-fusion`), and PyTorch, "
                "interleaved; one process or 2 ranks x 1 thread (FSDP2, a group per layer), `kept`.", "",
                table(["ranks", "seq", "fused ms", "unfused ms", "pytorch ms", "fused / unfused", "fused / pytorch",
                       "fused MB", "unfused MB", "load"], rows), ""]
    chosen = find(cases, section="k")
    if chosen:
        out += ["(k) Each fused kernel alone against libtorch's composition of the same formula, forward + backward at the "
                "shapes of one micro-batch (`megacpp-bench-kernels --seq N --repeats R`, R in the header; attention: the blocked kernel "
                "against `parallel::compat::causal_attention`, SDPA on 2.6 and query-row blocks on 1.13; AdamW: one step "
                "over the model's parameter count). Below 1, the fused kernel is faster.", ""]
        for case in chosen:
            out += [f"{case['side']}, sequence {case['seq']} (load {max(case['load']):.1f}):", "", "```"] + case["output"] + ["```", ""]
    chosen = find(cases, section="f")
    if chosen:
        rows = [[c["ulysses"], c["tiles"] or "off", f"{times(c, 'megacpp-1.13')[0]:.1f}", f"{peak(c, 'megacpp-1.13'):.0f}"]
                for c in chosen]
        out += ["(f) megacpp (libtorch 1.13) alone at 4,096 tokens, 2 ranks, global batch 2.", "",
                table(["ulysses_size", "tiled MLP", "ms", "MB/rank"], rows), ""]
    return "\n".join(out + [END])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--docs", help="a Markdown file whose block between the markers is replaced")
    parser.add_argument("--plot", help="the scaling grid's ratios as a PNG (needs matplotlib)")
    args = parser.parse_args()
    with open(args.results) as f:
        results = json.load(f)
    text = render(results)
    if args.plot:
        if not is_scaling(results):
            sys.exit(f"report: --plot draws the scaling grid (bench.py --sections h); {args.results} holds other sections")
        plot_scaling(results, args.plot)
        print(f"report: {args.plot} drawn from {args.results}")
    if not args.docs:
        print(text)
        return
    with open(args.docs) as f:
        doc = f.read()
    begin, end = markers(results)
    if begin not in doc or end not in doc:
        sys.exit(f"report: {args.docs} has no block between '{begin}' and '{end}'")
    before, rest = doc.split(begin, 1)
    after = rest.split(end, 1)[1]
    with open(args.docs, "w") as f:
        f.write(before + text + after)
    print(f"report: {args.docs} updated from {args.results}")


if __name__ == "__main__":
    main()
