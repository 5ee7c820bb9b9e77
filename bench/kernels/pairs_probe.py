"""Pairs probe: the ping-pong kernel, single CTAs vs 2-CTA pairs, with and without PDL, on a few shapes."""
import os, sys
import torch
sys.path.insert(0, "kernels/python")
import dk
from moe_shapes import SHAPES, group_rows, route
dk.load()
gen = torch.Generator(device="cuda"); gen.manual_seed(3)
def timeit(fn, reps=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) * 1000)
    ts.sort(); return ts[len(ts)//2]
for model, proj, T in (("olmoe", "down", 4096), ("mixtral-8x7b", "gate_up", 4096)):
    H, I, E, k = SHAPES[model]
    N, K = (2 * I, H) if proj == "gate_up" else (H, I)
    W = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    _, _, offsets = group_rows(route(T, E, k, "uniform", gen), E)
    M = T * k
    X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    Y = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    f = lambda: dk.grouped_gemm_contiguous(X, W, Y, offsets)
    res = {}
    dk.set_contig_pingpong("on")
    for pdl in (True, False):
        dk.set_pdl(pdl)
        for pairs in ("off", "on"):
            for dyn in (True, False):
                dk.set_contig_pairs(pairs); dk.set_contig_dynamic(dyn)
                res[f"pairs={pairs} dyn={int(dyn)} pdl={int(pdl)}"] = timeit(f)
    dk.set_pdl(True); dk.set_contig_pairs("auto"); dk.set_contig_dynamic(True)
    print(model, proj, T, " ".join(f"[{k}] {v:.0f}us" for k, v in res.items()), flush=True)
