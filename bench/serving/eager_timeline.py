"""Where the eager (not graph-replayed) kernels of a decode-probe run go: prefill chunks, mostly.

Reads the kernel-trace.csv of one or more `timeline.sh` runs (model-server/native-cuda/scripts/timeline.sh) and
prints, per kernel and grid, the median increment each launch adds to the stream (its end minus the later of its start
and the latest end before it: under PDL a kernel starts while its predecessor runs, so its own duration would count
that wait, and the host's idle gaps are nobody's), the
launch count and the summed increments, side by side for the runs named on the command line.

Usage: python3 bench/serving/eager_timeline.py NAME=kernel-trace.csv [NAME=kernel-trace.csv ...] [--top N]
Rows in the order of their largest summed increment over the runs; --top keeps that many (default 16).
"""
import csv
import re
import statistics
import subprocess
import sys
from collections import defaultdict

SKIP = ("fill_kernel", "random_kernel")  # the probe's weight initialisation


def short_names(mangled_names):
    """{mangled: the demangled name without namespaces and parameters} (e.g. qkv_post_items_kernel<4>), through
    c++filt where it is installed, else the mangled names as they are."""
    names = sorted(set(mangled_names))
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        plain = out.split("\n")[: len(names)]
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}
    short = {}
    for n, p in zip(names, plain):
        p = re.sub(r"^void ", "", p.replace("(anonymous namespace)::", "")).split("(", 1)[0]  # name<template args>
        short[n] = re.sub(r"^(?:[A-Za-z_0-9]+::)*", "", p)
    return short


def increments(path):
    """{(kernel, grid): [increment us, ...]} over the eager launches of one trace."""
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["graph_id"] == "0" and not any(s in r["name"] for s in SKIP)]
    rows.sort(key=lambda r: int(r["start_ns"]))
    names = short_names(r["name"] for r in rows)
    out = defaultdict(list)
    last = None
    for r in rows:
        start, end = int(r["start_ns"]), int(r["end_ns"])
        # the time this launch adds: from the later of its start and the previous launches' end (idle time and
        # the wait under PDL for its predecessor are not its own)
        inc = end - start if last is None else max(0, end - max(start, last))
        last = end if last is None else max(last, end)
        out[(names[r["name"]], r["grid"])].append(inc / 1e3)
    return out


def main(argv):
    top = 16
    runs = []
    i = 0
    while i < len(argv):
        if argv[i] == "--top" and i + 1 < len(argv):
            top = int(argv[i + 1])
            i += 2
            continue
        if "=" not in argv[i]:
            sys.exit(__doc__)
        name, path = argv[i].split("=", 1)
        runs.append((name, increments(path)))
        i += 1
    if not runs:
        sys.exit(__doc__)
    total = defaultdict(float)  # a row's largest summed increment over the runs orders it
    for _, inc in runs:
        for k, v in inc.items():
            total[k] = max(total[k], sum(v))
    keys = sorted(total, key=lambda k: -total[k])[:top]
    print(f"{'kernel':44s} {'grid':>12s}" + "".join(f" {n + ' med us':>16s} {'n':>4s} {'sum ms':>7s}" for n, _ in runs))
    for k in keys:
        cells = ""
        for _, inc in runs:
            v = inc.get(k)
            cells += (f" {statistics.median(v):16.1f} {len(v):4d} {sum(v) / 1e3:7.2f}" if v else f" {'-':>16s} {'-':>4s} {'-':>7s}")
        print(f"{k[0][:44]:44s} {k[1]:>12s}" + cells)


if __name__ == "__main__":
    main(sys.argv[1:])
