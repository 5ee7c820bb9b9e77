"""GPU checks of the swap-AB tensor-core grouped GEMMs, run by gpu_test.py: the W8A16 kernel
(sm90_w8a16_grouped_gemm_contiguous, family w8a16_wgmma) and the bf16 decode kernel (sm90_bf16_grouped_gemm_swapab,
family bf16_swapab). Both take the same cases through one adapter per kernel (Int8Kernel, Bf16Kernel).

Against fp32 PyTorch on the (dequantized: int8 values times their row scale) weights, NaN-poisoned outputs:
every model shape and projection at T = 1-4096 with uniform and zipf routing and the layer's own token-tile
hint, every token tile (8, 16, 32, 64, 128, 192) on one routing so experts take one and several tiles, one expert
taking every row (first and last index), empty experts, rows before offsets[0] and after offsets[E] (they
must stay NaN), fused SiLU on gate/up rows interleaved by 8, replays of a CUDA graph with new routing each
time, and the clear error for a shape it does not take.
"""
import torch

import dk
from moe_shapes import SHAPES, group_rows, projections, ref_grouped, rel_err, route

TOKENS = (1, 8, 17, 64, 256, 1024, 4096)


def layer_hint(M, E):
    """The rows-per-expert hint native-cuda passes: twice the mean plus 8."""
    return 2 * -(-M // E) + 8


def random_int8(E, N, K, gen):
    """Random int8 weights in [-127, 127] and positive row scales (what the quantizer produces)."""
    q = torch.randint(-127, 128, (E, N, K), dtype=torch.int8, device="cuda", generator=gen)
    s = torch.rand(E, N, dtype=torch.float32, device="cuda", generator=gen) * 0.02 + 1e-3
    return q, s


def poisoned(M, N):
    return torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")


class Int8Kernel:
    """sm90_w8a16_grouped_gemm_contiguous: int8 weights with fp32 row scales."""
    fam = "w8a16_wgmma"
    k_block = 128
    hints = (8, 16, 32, 64, 128, 300)  # one per token tile; 300: the 192-token tile
    rule = {1: 8, 8: 8, 9: 16, 16: 16, 17: 32, 32: 32, 33: 64, 96: 64, 97: 128, 256: 128, 257: 192, 100000: 192}

    @staticmethod
    def weights(E, N, K, gen):
        return random_int8(E, N, K, gen)

    @staticmethod
    def run(X, W, S, Y, offsets, hint, fuse_silu=False):
        dk.grouped_gemm_w8a16_contiguous(X, W, S, Y, offsets, hint, fuse_silu=fuse_silu)

    @staticmethod
    def tile(hint):
        return dk.w8a16_wgmma_token_tile(hint)

    @staticmethod
    def interleave(W, S):
        E, two_i, _ = W.shape
        return dk.interleave_gate_up(W), dk.interleave_gate_up(S.view(E, two_i, 1)).view(E, two_i)


class Bf16Kernel:
    """sm90_bf16_grouped_gemm_swapab: bf16 weights, no scales (S is None)."""
    fam = "bf16_swapab"
    k_block = 64
    hints = (8, 16, 32, 64)
    rule = {1: 8, 8: 8, 9: 16, 16: 16, 17: 32, 32: 32, 33: 64, 64: 64, 65: 64, 100000: 64}

    @staticmethod
    def weights(E, N, K, gen):
        return torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen), None

    @staticmethod
    def run(X, W, S, Y, offsets, hint, fuse_silu=False):
        dk.grouped_gemm_bf16_swapab(X, W, Y, offsets, hint, fuse_silu=fuse_silu)

    @staticmethod
    def tile(hint):
        return dk.bf16_swapab_token_tile(hint)

    @staticmethod
    def interleave(W, S):
        return dk.interleave_gate_up(W), None


def test_w8a16_wgmma(gen, check, tokens=TOKENS, expect_fail=False):
    return test_swapab(Int8Kernel, gen, check, tokens, expect_fail)


def test_bf16_swapab(gen, check, tokens=(1, 8, 17, 64, 256, 1024), expect_fail=False):
    return test_swapab(Bf16Kernel, gen, check, tokens, expect_fail)


def test_swapab(kern, gen, check, tokens, expect_fail=False):
    ok = True
    fam = kern.fam
    for model, (H, I, E, k) in SHAPES.items():
        for proj, N, K in projections(H, I):
            print(f"[{fam}] {model} {proj}", flush=True)  # progress: a hang shows where
            torch.cuda.empty_cache()
            Wq, Ws = kern.weights(E, N, K, gen)
            for T in tokens:
                for kind in ("uniform", "zipf"):
                    _, _, offsets = group_rows(route(T, E, k, kind, gen), E)
                    M = T * k
                    X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
                    ref = ref_grouped(X, Wq, offsets, Ws)
                    hints = [layer_hint(M, E)]
                    if T == 64 and kind == "zipf":  # every token tile: hot experts take several tiles
                        hints = list(kern.hints)
                    for hint in hints:
                        Y = poisoned(M, N)
                        kern.run(X, Wq, Ws, Y, offsets, hint)
                        tile = kern.tile(hint)
                        ok &= check(f"{fam}/{model}/{proj}/T{T}/{kind}/tile{tile}", rel_err(Y, ref))
            for hot in (0, E - 1):  # one expert takes every row
                M = 1000 if N * K < 50_000_000 else 300
                counts = torch.zeros(E, dtype=torch.int32, device="cuda")
                counts[hot] = M
                offsets = torch.zeros(E + 1, dtype=torch.int32, device="cuda")
                offsets[1:] = torch.cumsum(counts, 0)
                X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
                Y = poisoned(M, N)
                kern.run(X, Wq, Ws, Y, offsets, kern.hints[-1] if hot else 128)
                ok &= check(f"{fam}/{model}/{proj}/all-to-expert-{hot}", rel_err(Y, ref_grouped(X, Wq, offsets, Ws)))
            del Wq, Ws
    print(f"[{fam}] split K", flush=True)
    ok &= test_swapab_split(kern, gen, check, expect_fail)
    print(f"[{fam}] edges, silu", flush=True)
    ok &= test_swapab_edges(kern, gen, check)
    ok &= test_swapab_silu(kern, gen, check)
    if not expect_fail:
        print(f"[{fam}] graph", flush=True)
        ok &= test_swapab_graph(kern, gen, check)
        ok &= test_swapab_errors(kern, check)
    return ok


def forced_split(split):
    """DK_SWAPAB_SPLIT_K=split for the block (the launchers read it per launch)."""
    return dk.launch_switches(DK_SWAPAB_SPLIT_K=split)


def test_swapab_split(kern, gen, check, expect_fail=False):
    """K split over clusters of 2 and 4 CTAs (rank 0 adds the others' partials from its shared memory), forced on
    every shape at T = 1, 2, 4 and 16 (several items per cluster: the slot handshake; each label records what the
    launch rule would pick, which test_swapab's own cases run), and in the edge cases and fused SiLU; each must
    match the reference like the unsplit kernel."""
    ok = True
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for model, (H, I, E, k) in SHAPES.items():
        for proj, N, K in projections(H, I):
            torch.cuda.empty_cache()
            Wq, Ws = kern.weights(E, N, K, gen)
            for T in (1, 2, 4, 16):
                for kind in ("uniform", "zipf"):
                    _, _, offsets = group_rows(route(T, E, k, kind, gen), E)
                    M = T * k
                    X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
                    ref = ref_grouped(X, Wq, offsets, Ws)
                    hint = layer_hint(M, E)
                    rule = dk.swapab_split_k(kern.tile(hint), M, E, N, K // kern.k_block, sms)
                    for split in (2, 4) if T <= 4 else (4,):
                        with forced_split(split):
                            Y = poisoned(M, N)
                            kern.run(X, Wq, Ws, Y, offsets, hint)
                        ok &= check(f"{kern.fam}_split/{model}/{proj}/T{T}/{kind}/split{split}/rule{rule}", rel_err(Y, ref))
            del Wq, Ws
    if expect_fail:
        return ok
    for split in (2, 4):  # the edge cases (empty experts, rows outside every group) and fused SiLU, split
        with forced_split(split):
            ok &= test_swapab_edges(kern, gen, check, tag=f"_split{split}")
    with forced_split(4):
        ok &= test_swapab_silu(kern, gen, check, tag="_split4", tokens=(1, 17))
    return ok


def test_swapab_edges(kern, gen, check, tag=""):
    """Empty experts (first, middle, last), groups around every token tile size, rows before offsets[0]
    and after offsets[E] that belong to no group: those must stay NaN."""
    ok = True
    cases = [  # (N, K, counts, rows before, rows after)
        (128, 128, [1], 0, 40), (256, 384, [0, 7, 8, 9, 15, 16, 17, 0], 5, 33), (1536, 2048, [31, 0, 32, 33, 63, 64, 65, 0], 3, 129),
        (2048, 768, [0, 127, 128, 129, 255, 300], 0, 0), (384, 1408, [0, 0, 0, 2], 128, 1),
        (256, 256, [191, 192, 193, 0, 385], 2, 7),
    ]
    for N, K, counts_l, before, after in cases:
        E = len(counts_l)
        Wq, Ws = kern.weights(E, N, K, gen)
        counts = torch.tensor(counts_l, dtype=torch.int32, device="cuda")
        offsets = torch.zeros(E + 1, dtype=torch.int32, device="cuda")
        offsets[1:] = torch.cumsum(counts, 0) + before
        offsets[0] = before
        M = before + sum(counts_l) + after
        X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        ref = ref_grouped(X, Wq, offsets, Ws)
        rows = slice(before, before + sum(counts_l))
        for hint in kern.hints:
            Y = poisoned(M, N)
            kern.run(X, Wq, Ws, Y, offsets, hint)
            label = f"N{N}/K{K}/{'-'.join(map(str, counts_l))}/tile{kern.tile(hint)}"
            ok &= check(f"{kern.fam}_edge{tag}/{label}", rel_err(Y[rows], ref[rows]) if sum(counts_l) else 0.0)
            outside = torch.cat([Y[:before], Y[before + sum(counts_l):]])
            ok &= check(f"{kern.fam}_untouched{tag}/{label}", 0.0 if bool(outside.isnan().all().item()) else 1.0)
    return ok


def test_swapab_silu(kern, gen, check, tag="", tokens=(1, 17, 64, 1024)):
    """gate|up with silu(gate) * up in the epilogue: rows (and int8 scales) interleaved by 8."""
    ok = True
    for model, (H, I, E, k) in SHAPES.items():
        if model == "deepseek-v3":
            continue  # 15 GB of bf16 weights for the interleave check; the plain GEMM covers its shape
        q, s = kern.weights(E, 2 * I, H, gen)
        qi, si = kern.interleave(q, s)
        for T in tokens:
            _, _, offsets = group_rows(route(T, E, k, "zipf", gen), E)
            M = T * k
            X = torch.randn(M, H, dtype=torch.bfloat16, device="cuda", generator=gen)
            h = ref_grouped(X, q, offsets, s)
            ref = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
            for hint in sorted({layer_hint(M, E), 8, 128, kern.hints[-1]}):
                Y = poisoned(M, I)
                kern.run(X, qi, si, Y, offsets, hint, fuse_silu=True)
                ok &= check(f"{kern.fam}_silu{tag}/{model}/T{T}/tile{kern.tile(hint)}", rel_err(Y, ref))
        del q, s, qi, si
        torch.cuda.empty_cache()
    return ok


def test_swapab_graph(kern, gen, check):
    """Captured once in a CUDA graph, replayed with new routing and X: the launch reads the routing on the
    device only, so each replay must be right. T = 64, and T = 1 (Qwen3-30B-A3B gate_up: K split over clusters
    of 4 by the launch rule)."""
    ok = True
    H, I, E, k = SHAPES["qwen3-30b-a3b"]
    Wq, Ws = kern.weights(E, 2 * I, H, gen)
    for T in (64, 1):
        M = T * k
        X = torch.zeros(M, H, dtype=torch.bfloat16, device="cuda")
        offsets = torch.zeros(E + 1, dtype=torch.int32, device="cuda")
        Y = poisoned(M, 2 * I)
        s = torch.cuda.Stream()
        # the side stream must see the zeroed offsets (written on the default stream): without this wait the
        # warm-up could read the allocator's stale bytes as offsets (the --decode run of 03:17 UTC, session 6,
        # died here with an illegal address when the previous test's memory came back)
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            kern.run(X, Wq, Ws, Y, offsets, layer_hint(M, E))  # warm-up outside the capture
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                kern.run(X, Wq, Ws, Y, offsets, layer_hint(M, E))
        for trial in range(3):
            _, _, off = group_rows(route(T, E, k, "zipf" if trial else "uniform", gen), E)
            offsets.copy_(off)
            X.copy_(torch.randn(M, H, dtype=torch.bfloat16, device="cuda", generator=gen))
            Y.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            name = f"{kern.fam}_graph/trial{trial}" if T == 64 else f"{kern.fam}_graph/T{T}/trial{trial}"
            ok &= check(name, rel_err(Y, ref_grouped(X, Wq, offsets, Ws)))
        del g
    return ok


def test_swapab_errors(kern, check):
    """A shape the kernel does not take is refused with a message, not run."""
    q, s = kern.weights(2, 96, 128, torch.Generator(device="cuda"))
    X = torch.zeros(4, 128, dtype=torch.bfloat16, device="cuda")
    Y = torch.zeros(4, 96, dtype=torch.bfloat16, device="cuda")
    off = torch.tensor([0, 2, 4], dtype=torch.int32, device="cuda")
    try:
        kern.run(X, q, s, Y, off, 16)
        refused = False
    except RuntimeError as e:
        refused = "multiple" in str(e) and "128" in str(e)
    ok = check(f"{kern.fam}_errors/N96", 0.0 if refused else 1.0)
    # the launcher's token-tile rule (docs/kernels.md): hint -> tile at every boundary
    got = {h: kern.tile(h) for h in kern.rule}
    return ok & check(f"{kern.fam}_errors/token-tile-rule", 0.0 if got == kern.rule else 1.0)
