#!/usr/bin/env python3
"""Per-kernel costs of replayed decode steps from a kernel trace (model-server/native-cuda/scripts/timeline.sh).

    python3 bench/serving/timeline_report.py kernel-trace.csv [--graph ID] [--skip 3]

Takes the most-replayed CUDA graph (or --graph), cuts it into steps at the embedding kernel, drops the first --skip
steps and the last two, and prints per kernel (name, grid, cluster): how many per step, the median duration, the
median gap from the previous kernel's end (negative: it started before that one ended, PDL), and the median
increment it adds to the step (its end minus the latest end before it) with the sum of those per step; then the
step's GPU time and the gap between steps (the host's share when steps run one at a time).
"""
import argparse
import collections
import csv
import re
import statistics as st
import subprocess


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--graph", default=None)
    ap.add_argument("--skip", type=int, default=3)
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(a.trace)) if r["graph_id"] != "0"]
    if not rows:
        raise SystemExit("no kernels of replayed graphs in the trace")
    gid = a.graph or collections.Counter(r["graph_id"] for r in rows).most_common(1)[0][0]
    rows = [r for r in rows if r["graph_id"] == gid]
    for r in rows:
        r["s"], r["e"] = int(r["start_ns"]), int(r["end_ns"])
    rows.sort(key=lambda r: r["s"])
    names = sorted({r["name"] for r in rows})
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    short = {}
    for n, d in zip(names, demangled):
        m = re.search(r"(\w+)(<[^()]*>)?\(", d)
        short[n] = (m.group(1) + (m.group(2) or ""))[:56] if m else d[:56]
    steps, cur = [], []
    for r in rows:
        if "embedding" in r["name"] and cur:
            steps.append(cur)
            cur = []
        cur.append(r)
    steps.append(cur)
    steps = steps[a.skip : -2]
    n = collections.Counter(len(s) for s in steps).most_common(1)[0][0]
    steps = [s for s in steps if len(s) == n]
    if not steps:
        raise SystemExit("no complete steps")
    per = collections.defaultdict(lambda: ([], [], []))
    for s in steps:
        latest = None
        for i, r in enumerate(s):
            key = f"{short[r['name']]} grid {r['grid']} cluster {r['cluster']}"
            dur = r["e"] - r["s"]
            gap = r["s"] - latest if latest is not None else 0
            inc = r["e"] - latest if latest is not None else dur
            per[(i, key)][0].append(dur)
            per[(i, key)][1].append(gap)
            per[(i, key)][2].append(inc)
            latest = max(latest or 0, r["e"])
    agg = collections.defaultdict(lambda: ([], [], []))
    for (_, key), (d, g, inc) in per.items():
        for k, xs in enumerate((d, g, inc)):
            agg[key][k].append(st.median(xs))
    print(f"graph {gid}: {len(steps)} steps of {n} kernels")
    print(f"{'kernel':<96} {'per step':>8} {'dur us':>8} {'gap us':>8} {'incr us':>8} {'sum us':>8}")
    total = 0.0
    for key, (d, g, inc) in sorted(agg.items(), key=lambda kv: -sum(kv[1][2])):
        total += sum(inc)
        print(f"{key:<96} {len(d):>8} {st.median(d) / 1e3:>8.2f} {st.median(g) / 1e3:>8.2f} {st.median(inc) / 1e3:>8.2f} {sum(inc) / 1e3:>8.1f}")
    gpu = [s[-1]["e"] - s[0]["s"] for s in steps]
    between = [steps[i + 1][0]["s"] - steps[i][-1]["e"] for i in range(len(steps) - 1)]
    print(f"sum of increments {total / 1e3:.1f} us; step GPU time median {st.median(gpu) / 1e3:.1f} us; between steps median {st.median(between) / 1e3:.1f} us")


if __name__ == "__main__":
    main()
