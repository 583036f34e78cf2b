"""Where a step's time goes: self time per operator from a Chrome trace (megacpp-train --profile,
or torch.profiler's export_chrome_trace), largest first.

  python3 bench/profile_summary.py TRACE.json [--top 15]

An operator's self time is its duration minus that of the operators it called (nested events of
the same thread), so the rows add up to the traced CPU time; the share is of that total.
"""
import argparse
import collections
import json


def self_times(events):
    """{name: (self microseconds, calls)} over the complete ("X") CPU operator events."""
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat", "cpu_op") in ("cpu_op", "user_annotation", "Operator") and "dur" in e:
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    totals, calls = collections.Counter(), collections.Counter()
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # (end, name) of the enclosing operators
        for e in thread_events:
            while stack and stack[-1][0] <= e["ts"]:
                stack.pop()
            if stack:
                totals[stack[-1][1]] -= e["dur"]  # the caller's time spent in this one
            totals[e["name"]] += e["dur"]
            calls[e["name"]] += 1
            stack.append((e["ts"] + e["dur"], e["name"]))
    return {name: (totals[name], calls[name]) for name in totals}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    times = self_times(trace["traceEvents"] if isinstance(trace, dict) else trace)
    total = sum(t for t, _ in times.values())
    print(f"{'operator':40s} {'self ms':>10s} {'share':>7s} {'calls':>7s}")
    for name, (t, n) in sorted(times.items(), key=lambda item: -item[1][0])[:args.top]:
        print(f"{name[:40]:40s} {t / 1000:10.1f} {100 * t / total:6.1f}% {n:7d}")
    print(f"{'total':40s} {total / 1000:10.1f}")


if __name__ == "__main__":
    main()
