"""A few single launches for Nsight Compute (kernel duration, DRAM throughput, occupancy):
ncu --clock-control none --kernel-name regex:grouped_gemm --metrics ... python3 kernels/scripts/ncu_probe.py [CASE ...]
CASE = model:proj:tokens[:epilogue] (e.g. qwen3-30b-a3b:down:16384:none; epilogue for the contiguous kernel:
direct, staged (the default) or none); without cases, the three launches below.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import dk  # noqa: E402
from moe_shapes import contiguous_case  # noqa: E402

dk.load()
gen = torch.Generator(device="cuda")
gen.manual_seed(3)
cases = [c.split(":") for c in sys.argv[1:]] or [("qwen3-30b-a3b", "down", "1"), ("olmoe", "gate_up", "1"),
                                                   ("mixtral-8x7b", "gate_up", "4096")]
for case in cases:
    model, proj, T = case[0], case[1], int(case[2])
    epilogue = case[3] if len(case) > 3 else "staged"
    W, X, Y, offsets = contiguous_case(model, proj, T, gen)
    E, N, K = W.shape
    M = X.shape[0]
    if T <= 8:
        dk.grouped_gemm_masked(X, W, Y, offsets=offsets, max_rows=T, max_active=min(E, M))
        q, s = dk.quantize_int8_rows(W.view(E * N, K))
        dk.grouped_gemm_masked(X, q.view(E, N, K), Y, offsets=offsets, max_rows=T, max_active=min(E, M),
                               scales=s.view(E, N))
    else:
        dk.set_contig_epilogue(epilogue)
        dk.grouped_gemm_contiguous(X, W, Y, offsets)
        dk.set_contig_epilogue("staged")
    torch.cuda.synchronize()
    print(model, proj, T, epilogue, "done", flush=True)
