"""A few single launches for Nsight Compute (kernel duration, DRAM throughput, occupancy):
ncu --clock-control none --kernel-name regex:grouped_gemm --metrics ... python3 kernels/scripts/ncu_probe.py [CASE ...]
CASE = model:proj:tokens[:option...] (e.g. qwen3-30b-a3b:down:16384:none:coop); options for the contiguous kernel:
an epilogue (direct, staged (the default) or none), coop (the cooperative kernel where the ping-pong one would run),
swap (the cooperative kernel with swapped tails, session 22),
dense (instead: the dense cuBLAS GEMM of the same M, N, K, torch's A @ B; its kernels are named nvjet_* on the
H200, so add them to --kernel-name). Without cases, the three launches below. Session 21's tensor-pipe comparison:
--metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,
lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed
--kernel-name regex:'grouped_gemm|nvjet' with qwen3-30b-a3b:gate_up:4096:coop qwen3-30b-a3b:gate_up:4096:none:coop
qwen3-30b-a3b:gate_up:4096:dense (and the same for down).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import dk  # noqa: E402
from moe_shapes import contiguous_case, row_tiles  # noqa: E402

dk.load()
gen = torch.Generator(device="cuda")
gen.manual_seed(3)
cases = [c.split(":") for c in sys.argv[1:]] or [("qwen3-30b-a3b", "down", "1"), ("olmoe", "gate_up", "1"),
                                                   ("mixtral-8x7b", "gate_up", "4096")]
for case in cases:
    model, proj, T = case[0], case[1], int(case[2])
    options = set(case[3:])
    unknown = options - {"direct", "staged", "none", "coop", "dense", "swap"}
    if unknown:
        sys.exit(f"unknown option(s) {sorted(unknown)} in {':'.join(case)}")
    epilogue = next((o for o in ("direct", "staged", "none") if o in options), "staged")
    W, X, Y, offsets = contiguous_case(model, proj, T, gen)
    E, N, K = W.shape
    M = X.shape[0]
    if "dense" in options:
        A = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        B = torch.randn(K, N, dtype=torch.bfloat16, device="cuda", generator=gen)
        torch.matmul(A, B)
        epilogue = "dense"
    elif T <= 8:
        dk.grouped_gemm_masked(X, W, Y, offsets=offsets, max_rows=T, max_active=min(E, M))
        q, s = dk.quantize_int8_rows(W.view(E * N, K))
        dk.grouped_gemm_masked(X, q.view(E, N, K), Y, offsets=offsets, max_rows=T, max_active=min(E, M),
                               scales=s.view(E, N))
    else:
        dk.set_contig_epilogue(epilogue)
        dk.set_contig_pingpong("off" if options & {"coop", "swap"} else "auto")
        dk.set_contig_swap_tails("on" if "swap" in options else "auto")
        dk.grouped_gemm_contiguous(X, W, Y, offsets)
        dk.set_contig_epilogue("staged")
        dk.set_contig_pingpong("auto")
        dk.set_contig_swap_tails("auto")
    torch.cuda.synchronize()
    # the MMA work the grouping costs: 128-row tiles per expert, a tail of <= 64 rows as half a tile (half tails)
    tiles = row_tiles((offsets[1:] - offsets[:-1]).tolist(), swap_tails="swap" in options)
    print(model, proj, T, epilogue, f"done; row tiles {tiles:g} (half tails as 0.5) for {M / 128:g} of rows",
          flush=True)
