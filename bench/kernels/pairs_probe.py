"""The ping-pong prefill GEMM in single CTAs against 2-CTA pairs (DK_CONTIG_PAIRS), each with the dynamic and the
static schedule, with and without PDL, on two shapes at 4,096 tokens: one short K (OLMoE down, K = 1,024) and one
long (Mixtral gate_up, K = 4,096). Median of 20 single launches timed with CUDA events (not graph replays: a probe,
bench.py --prefill has the full table). Usage (H200, after kernels/scripts/build_capi.sh):
    DK_CONTIG_LOG=1 python3 bench/kernels/pairs_probe.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))
import dk  # noqa: E402
from moe_shapes import contiguous_case  # noqa: E402

CASES = (("olmoe", "down", 4096), ("mixtral-8x7b", "gate_up", 4096))


def median_us(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    times.sort()
    return times[len(times) // 2]


def main():
    dk.load()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(3)
    for model, proj, T in CASES:
        W, X, Y, offsets = contiguous_case(model, proj, T, gen)
        res = {}
        dk.set_contig_pingpong("on")
        for pdl in (True, False):
            dk.set_pdl(pdl)
            for pairs in ("off", "on"):
                for dynamic in (True, False):
                    dk.set_contig_pairs(pairs)
                    dk.set_contig_dynamic(dynamic)
                    res[f"pairs={pairs} dyn={int(dynamic)} pdl={int(pdl)}"] = median_us(
                        lambda: dk.grouped_gemm_contiguous(X, W, Y, offsets))
        dk.set_pdl(True)  # the library defaults
        dk.set_contig_pairs("auto")
        dk.set_contig_dynamic(True)
        dk.set_contig_pingpong("auto")
        print(model, proj, T, " ".join(f"[{k}] {v:.0f}us" for k, v in res.items()), flush=True)


if __name__ == "__main__":
    main()
