"""What an expert's tail costs the prefill GEMM: every expert gets the same rows, base + t (base a multiple of the
128-row tile, t = 0-64), so every tail has t rows, and the cooperative kernel is timed with its tails as 64- or
128-row tiles (half tails on: the default's tiles) and swapped (session 22: t <= 32 as a 16- or 32-wide MMA inside
the expert's last whole tile, or alone where base = 0), each also writing nothing (the MMAs and loads alone).
The marginal microseconds of t over t = 0 give a tail's cost in whole tiles of the same launch.

Usage (on the GPU machine, after kernels/scripts/build_capi.sh): python3 bench/kernels/tail_probe.py [--json OUT]
[--shapes qwen3-30b-a3b:gate_up:256,deepseek-v3:gate_up:128,...] [--tails 0,8,16,...] [--once]
--once: one launch per variant and tail, untimed, for Nsight Compute (e.g. why a swapped tail beside another whole
tile costs 3-4x its FLOPs: `ncu --kernel-name regex:grouped_gemm --section ComputeWorkloadAnalysis
--section MemoryWorkloadAnalysis --section WarpStateStats python3 bench/kernels/tail_probe.py --once
--shapes qwen3-30b-a3b:gate_up:256 --tails 0,16`); launches in the order printed.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import dk  # noqa: E402
from bench import GraphSet  # noqa: E402
from moe_shapes import SHAPES, projections  # noqa: E402

VARIANTS = {  # name: (swap tails, epilogue)
    "half": ("off", "staged"), "swap": ("on", "staged"), "half_noepi": ("off", "none"), "swap_noepi": ("on", "none")}


def probe(model, proj, base, tails, gen, once=False):
    H, I, E, _ = SHAPES[model]
    N, K = next((n, k) for p, n, k in projections(H, I) if p == proj)
    W = [torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen) for _ in range(2)]
    rows = []
    for t in tails:
        per = base + t
        if per == 0:
            continue
        M = E * per
        X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        Y = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
        offsets = torch.arange(0, M + 1, per, dtype=torch.int32, device="cuda")
        graphs = GraphSet()
        dk.set_contig_pingpong("off")  # the cooperative kernel in every variant
        dk.set_contig_half_tails("on")
        for name, (swap, epi) in VARIANTS.items():
            dk.set_contig_swap_tails(swap)
            dk.set_contig_epilogue(epi)
            if once:
                dk.grouped_gemm_contiguous(X, W[0], Y, offsets)
                torch.cuda.synchronize()
                print(f"{model} {proj} base {base} tail {t}: {name} launched", flush=True)
                continue
            flops = 2.0 * M * N * K
            graphs.add(name, [lambda w=w: dk.grouped_gemm_contiguous(X, w, Y, offsets) for w in W], flops / 5e14)
        dk.set_contig_swap_tails("auto")  # back to the library defaults
        dk.set_contig_epilogue("staged")
        dk.set_contig_half_tails("auto")
        dk.set_contig_pingpong("auto")
        if once:
            continue
        us = graphs.time()
        rows.append({"model": model, "proj": proj, "N": N, "K": K, "E": E, "base": base, "tail": t, "rows": M, "us": us})
        print(f"{model:16s} {proj:7s} base {base:3d} tail {t:2d}: " +
              "  ".join(f"{k} {v:8.1f}" for k, v in us.items()), flush=True)
        del X, Y
    ref = next((r for r in rows if r["tail"] == 0), None)
    whole = base // 128
    if ref and whole:  # a tail's marginal cost in the launch's whole tiles (t = 0: E * whole * n_tiles tiles)
        for r in rows:
            r["tail_cost_tiles"] = {k: (v - ref["us"][k]) / (ref["us"][k] / whole) for k, v in r["us"].items()}
            print(f"  tail {r['tail']:2d}: cost in whole tiles " +
                  "  ".join(f"{k} {v:5.2f}" for k, v in r["tail_cost_tiles"].items()))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--shapes", default="qwen3-30b-a3b:gate_up:256,qwen3-30b-a3b:gate_up:128,deepseek-v3:gate_up:128,"
                    "qwen3-30b-a3b:down:256,qwen3-30b-a3b:gate_up:0")
    ap.add_argument("--tails", default="0,1,8,16,17,24,32,33,48,64")
    ap.add_argument("--once", action="store_true", help="one untimed launch per variant (for Nsight Compute)")
    args = ap.parse_args()
    dk.load()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(5)
    tails = [int(t) for t in args.tails.split(",")]
    out = {"device": torch.cuda.get_device_name(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
           "rows": []}
    for spec in args.shapes.split(","):
        model, proj, base = spec.split(":")
        out["rows"] += probe(model, proj, int(base), tails, gen, args.once)
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
