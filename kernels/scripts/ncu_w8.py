"""Single launches of the W8A16 tensor-core grouped GEMM for Nsight Compute (warp stalls, issue, memory):
ncu --section ... --kernel-name regex:w8a16_grouped_gemm_wgmma python3 kernels/scripts/ncu_w8.py [variant]
Cases: Qwen3-30B-A3B gate_up at T = 64 (token tile 16) and T = 1024 (tile 128), Mixtral gate_up at T = 64 (tile 64).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import dk  # noqa: E402
from moe_shapes import SHAPES, group_rows, route  # noqa: E402

dk.load()
if len(sys.argv) > 1 and hasattr(dk, "set_w8_wgmma_variant"):
    dk.set_w8_wgmma_variant(int(sys.argv[1]))
gen = torch.Generator(device="cuda")
gen.manual_seed(3)
for model, T in (("qwen3-30b-a3b", 64), ("qwen3-30b-a3b", 1024), ("mixtral-8x7b", 64)):
    H, I, E, k = SHAPES[model]
    N, K = 2 * I, H
    q = torch.randint(-127, 128, (E, N, K), dtype=torch.int8, device="cuda", generator=gen)
    s = torch.rand(E, N, dtype=torch.float32, device="cuda", generator=gen)
    _, _, offsets = group_rows(route(T, E, k, "uniform", gen), E)
    M = T * k
    X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    Y = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    dk.grouped_gemm_w8a16_contiguous(X, q, s, Y, offsets, 2 * math.ceil(M / E) + 8)
    torch.cuda.synchronize()
    print(model, T, "done", flush=True)
