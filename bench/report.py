"""docs/performance.md's benchmark tables from bench/bench.py's JSON (nothing copied by hand).

  python3 bench/report.py RESULTS.json                    # the tables, as Markdown, on stdout
  python3 bench/report.py RESULTS.json --docs docs/performance.md
                                                          # replaces the block between the markers

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


def render(results):
    s, cases = results["settings"], results["cases"]
    out = [BEGIN, "",
           f"Measured on {s['date']} at commit `{s['commit']}` on {s['cores']} cores ({s['cpu']}), by "
           f"`{s['command']}`: megacpp built against the PyTorch 2.6 root's libtorch (`{s['build'].split('/')[-1]}/`) "
           f"and PyTorch {s['pytorch']} eager in that root; {s['iters']} iterations per run (fewer for the longest "
           f"cases), the median after {s['warmup']} warm-up; {s['repeats']} runs of each side per case, interleaved. "
           "Model: Llama, {layers} layers, hidden {hidden}, {heads} heads, FFN {ffn}, sequence {seq}, vocabulary "
           "{vocab}, global batch {batch} (micro-batch 1), fp32, AdamW, clipping at 1.0.".format(**s["model"]), ""]
    sections = [
        ("(a) One process, no sharding. `kept`: both keep freed memory (PyTorch with `MALLOC_MMAP_THRESHOLD_=33554432 "
         "MALLOC_TRIM_THRESHOLD_=1073741824`, what megacpp-train sets itself); `glibc`: both with glibc's defaults "
         "(megacpp with `MEGACPP_KEEP_HOST_MEMORY=0`).",
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
        out += ["(g) megacpp built against Debian's libtorch 1.13 (`build/`; no SDPA there: its own attention in blocks "
                "of query rows) against PyTorch 2.6 eager (SDPA); one process, 1 thread, `kept`.", "",
                table(["seq"] + columns("megacpp-1.13"),
                      side_by_side(chosen, lambda c: [c["cfg"]["seq"]], "megacpp-1.13")), ""]
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
    args = parser.parse_args()
    with open(args.results) as f:
        text = render(json.load(f))
    if not args.docs:
        print(text)
        return
    with open(args.docs) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"report: {args.docs} has no block between '{BEGIN}' and '{END}'")
    before, rest = doc.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    with open(args.docs, "w") as f:
        f.write(before + text + after)
    print(f"report: {args.docs} updated from {args.results}")


if __name__ == "__main__":
    main()
