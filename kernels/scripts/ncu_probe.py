"""A few single launches for Nsight Compute (kernel duration, DRAM throughput, occupancy):
ncu --clock-control none --kernel-name regex:grouped_gemm --metrics ... python3 kernels/scripts/ncu_probe.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import dk  # noqa: E402
from moe_shapes import SHAPES, group_rows, route  # noqa: E402

dk.load()
gen = torch.Generator(device="cuda")
gen.manual_seed(3)
for model, proj, T in (("qwen3-30b-a3b", "down", 1), ("olmoe", "gate_up", 1), ("mixtral-8x7b", "gate_up", 4096)):
    H, I, E, k = SHAPES[model]
    N, K = (2 * I, H) if proj == "gate_up" else (H, I)
    W = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    _, _, offsets = group_rows(route(T, E, k, "uniform", gen), E)
    M = T * k
    X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    Y = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    if T <= 8:
        dk.grouped_gemm_masked(X, W, Y, offsets=offsets, max_rows=T, max_active=min(E, M))
        q, s = dk.quantize_int8_rows(W.view(E * N, K))
        dk.grouped_gemm_masked(X, q.view(E, N, K), Y, offsets=offsets, max_rows=T, max_active=min(E, M),
                               scales=s.view(E, N))
    else:
        dk.grouped_gemm_contiguous(X, W, Y, offsets)
    torch.cuda.synchronize()
    print(model, proj, T, "done", flush=True)
