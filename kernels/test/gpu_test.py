"""GPU correctness tests for every kernel (run on the H200): fp32 PyTorch references on random data.

Usage: python3 kernels/test/gpu_test.py [--lib PATH] [--json OUT] [--expect-fail] [--decode | --prefill]
--expect-fail runs only the GEMM tests against a mutated build (expert index off by one) and
exits 0 only if every GEMM kernel family fails somewhere, which shows the tests would catch that bug.
--decode: the decode subset (T = 1, 8, 64 and the small-M edge cases, graph, fused SiLU, layer, and the
PDL mode of the legacy small-M kernel in a graph chain producer -> gate|up -> down: gpu_pdl_chain.py).
--prefill: the contiguous (wgmma) kernel only, both epilogues (direct and staged): every shape at
T = 64-4096, ragged groups, empty experts, rows outside every group, fused SiLU, the MoE layer.
The swap-AB tensor-core kernels (gpu_swapab.py: W8A16 and bf16) run in every mode, at the mode's token
counts; --w8 runs them alone.
"""
import argparse
import json
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import dk  # noqa: E402
from moe_shapes import SHAPES, group_rows, projections, ref_grouped, rel_err, route  # noqa: E402
from gpu_pdl_chain import test_pdl_chain  # noqa: E402
from gpu_swapab import test_bf16_swapab, test_w8a16_wgmma  # noqa: E402

TOL_BF16 = 1e-2  # relative Frobenius error allowed for bf16 output
SMALL_M_IMPLS = ("stream", "legacy", "pair")  # every small-M schedule is checked
CONTIG_EPILOGUES = ("direct", "staged", "stmatrix", "tma")  # the prefill kernel's epilogues; staged is the default
EXPECT_FAIL = False  # mutation run: skip checks that compare two launches of the same (mutated) kernel
results = []


def check(name, err, tol=TOL_BF16, **info):
    ok = err <= tol
    results.append({"test": name, "rel_err": err, "tol": tol, "ok": ok, **info})
    if not ok:
        print(f"FAIL {name} err={err:.3e} {info}", flush=True)
    return ok


def poisoned(M, N):
    return torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")


def gemm_cases(gen, tokens=(1, 8, 64, 256, 1024, 4096)):
    """Yields (label, E, N, K, offsets) over shapes, projections, token counts and routings,
    plus edge cases: empty experts, one expert taking every row (first and last index)."""
    for model, (H, I, E, k) in SHAPES.items():
        for proj, N, K in projections(H, I):
            for T in tokens:
                for kind in ("uniform", "zipf"):
                    _, _, offsets = group_rows(route(T, E, k, kind, gen), E)
                    yield f"{model}/{proj}/T{T}/{kind}", E, N, K, offsets
            for hot in (0, E - 1):
                M = 1000 if N * K < 50_000_000 else 300
                counts = torch.zeros(E, dtype=torch.int32, device="cuda")
                counts[hot] = M
                offsets = torch.zeros(E + 1, dtype=torch.int32, device="cuda")
                offsets[1:] = torch.cumsum(counts, 0)
                yield f"{model}/{proj}/all-to-expert-{hot}", E, N, K, offsets


def swapped_tail_rows(offsets, M):
    """[M] bool: the rows the cooperative kernel with swapped tails runs swapped (an expert's last <= 32 rows past its
    whole 128-row tiles, or all of its rows when it has <= 32)."""
    mask = torch.zeros(M, dtype=torch.bool, device="cuda")
    off = offsets.tolist()
    for a, b in zip(off[:-1], off[1:]):
        rem = (b - a) % 128
        if 0 < rem <= 32:
            mask[b - rem:b] = True
    return mask


def check_contiguous(label, X, W, offsets, ref, fuse_silu=False, family="contiguous_bf16", rows=slice(None)):
    """The wgmma kernel with each epilogue on NaN-poisoned outputs, compared on `rows` (the groups'
    rows); the staged epilogue must also give the direct one's bits over all of Y, NaN rows included
    (same bf16 rounding, same rows written). Returns (ok, {epilogue: Y})."""
    ok = True
    out = {}

    def launch():  # one launch with the switches as they are now, into a NaN-poisoned output
        Y = poisoned(X.shape[0], W.shape[1] // (2 if fuse_silu else 1))
        dk.grouped_gemm_contiguous(X, W, Y, offsets, fuse_silu=fuse_silu)
        return Y

    dk.set_contig_pingpong("off")  # the cooperative kernel here; the ping-pong one below
    dk.set_contig_swap_tails("off")  # tails as 64- or 128-row tiles; the swapped ones below
    for epi in CONTIG_EPILOGUES:
        dk.set_contig_epilogue(epi)
        Y = launch()
        out[epi] = Y
        ok &= check(family + ("" if epi == "direct" else f"_{epi}") + "/" + label, rel_err(Y[rows], ref[rows]))
    dk.set_contig_epilogue("staged")  # the library default
    # every row tile at 128 rows (half tails off) and every tail of <= 64 rows a half tile (on; the default, auto,
    # leaves them off for large weight tiles on few rows per expert): the same products over the same k order, so
    # the same bits
    dk.set_contig_half_tails("off")
    Y = launch()
    dk.set_contig_half_tails("on")
    Yh = launch()
    dk.set_contig_half_tails("auto")  # the library default
    ok &= check(family + "_full_tails/" + label, rel_err(Y[rows], ref[rows]))
    ok &= check(family + "_half_tails/" + label, rel_err(Yh[rows], ref[rows]))
    dk.set_contig_dynamic(False)  # the static schedule: the same tiles, so the same bits
    Ys = launch()
    dk.set_contig_dynamic(True)  # the library default
    ok &= check(family + "_static/" + label, rel_err(Ys[rows], ref[rows]))
    def each_schedule(name, switch, off):  # [(name, Y)] with a switch on: each schedule, and the TMA-store epilogue
        switch("on")
        ys = [(name, launch())]
        dk.set_contig_dynamic(False)
        ys.append((name + "_static", launch()))
        dk.set_contig_dynamic(True)
        dk.set_contig_epilogue("tma")
        ys.append((name + "_tma", launch()))
        dk.set_contig_epilogue("staged")
        switch(off)
        return ys

    # swapped tails (the cooperative kernel)
    swap = each_schedule("swap_tails", dk.set_contig_swap_tails, "off")
    tails = swapped_tail_rows(offsets, X.shape[0])
    for name, y in swap:
        ok &= check(f"{family}_{name}/" + label, rel_err(y[rows], ref[rows]))
        if bool(tails.any().item()):  # the swapped rows alone: a wrong tail must not hide among many good rows
            ok &= check(f"{family}_{name}_tail_rows/" + label, rel_err(y[tails], ref[tails]))
    dk.set_contig_pingpong("on")  # the ping-pong kernel: 128 x 128 tiles per warpgroup, the same k order
    Yp = launch()
    ok &= check(family + "_pingpong/" + label, rel_err(Yp[rows], ref[rows]))
    # and as session 17 ran it: every row tile 128 rows, the static schedule
    dk.set_contig_half_tails("off")
    dk.set_contig_dynamic(False)
    Yp0 = launch()
    dk.set_contig_half_tails("auto")  # the library defaults
    dk.set_contig_dynamic(True)
    # and in 2-CTA clusters sharing each token tile (pairs; N a multiple of 256, else single CTAs): the same tiles,
    # with either schedule
    dk.set_contig_pairs("on")
    Ypair = launch()
    dk.set_contig_dynamic(False)
    Ypair_s = launch()
    dk.set_contig_dynamic(True)
    dk.set_contig_pairs("auto")
    # the ping-pong kernel and its pairs staging with stmatrix, with the TMA stores and without
    dk.set_contig_epilogue("tma")
    Yp_tma = launch()
    dk.set_contig_pairs("on")
    Ypair_tma = launch()
    dk.set_contig_pairs("auto")
    dk.set_contig_epilogue("stmatrix")
    Yp_stm = launch()
    dk.set_contig_epilogue("staged")  # the library default
    dk.set_contig_pingpong("auto")
    ok &= check(family + "_pingpong_tma/" + label, rel_err(Yp_tma[rows], ref[rows]))
    ok &= check(family + "_pingpong_pairs_tma/" + label, rel_err(Ypair_tma[rows], ref[rows]))
    ok &= check(family + "_pingpong_stmatrix/" + label, rel_err(Yp_stm[rows], ref[rows]))
    ok &= check(family + "_pingpong_static_full/" + label, rel_err(Yp0[rows], ref[rows]))
    ok &= check(family + "_pingpong_pairs/" + label, rel_err(Ypair[rows], ref[rows]))
    ok &= check(family + "_pingpong_pairs_static/" + label, rel_err(Ypair_s[rows], ref[rows]))
    if not EXPECT_FAIL:
        def same_bits(name, *ys):  # every launch in ys gave the staged epilogue's bits over all of Y
            staged = out["staged"].view(torch.int16)
            same = all(torch.equal(y.view(torch.int16), staged) for y in ys)
            return check(f"{family}_{name}_same_bits/" + label, 0.0 if same else 1.0)

        ok &= same_bits("staged", out["direct"])
        # stmatrix puts the same bytes in the staging buffer; TMA stores write whole chunks of the expert's rows
        # only: the same bits, NaN rows untouched
        ok &= same_bits("stmatrix", out["stmatrix"], Yp_stm)
        ok &= same_bits("tma", out["tma"], Yp_tma, Ypair_tma)
        ok &= same_bits("half_tails", Y, Yh)
        ok &= same_bits("static", Ys)
        ok &= same_bits("pingpong", Yp, Yp0)
        ok &= same_bits("pingpong_pairs", Ypair, Ypair_s)
        # swapped tails: every row outside the swapped tails (whole tiles, half tails, rows of no expert) as staged
        # gives it; the swapped rows are the same products in another MMA shape (checked against the reference above)
        keep = ~tails
        staged = out["staged"][keep].view(torch.int16)
        same = all(torch.equal(y[keep].view(torch.int16), staged) for _, y in swap)
        ok &= check(f"{family}_swap_tails_same_bits/" + label, 0.0 if same else 1.0)
    dk.set_contig_swap_tails("auto")  # the library default
    return ok, out


def test_grouped_gemms(gen, tokens=(1, 8, 64, 256, 1024, 4096), contiguous=True, small_m=True):
    ok = True
    weights = {}
    for label, E, N, K, offsets in gemm_cases(gen, tokens):
        key = (E, N, K)
        if key not in weights:
            weights.clear()
            torch.cuda.empty_cache()
            W = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
            if small_m:
                q, s = dk.quantize_int8_rows(W.view(E * N, K))
                weights[key] = (W, q.view(E, N, K), s.view(E, N))
            else:
                weights[key] = (W, None, None)
        W, Wq, Ws = weights[key]
        max_rows = int((offsets[1:] - offsets[:-1]).max().item())
        if max_rows > 256 and not contiguous:
            continue
        M = int(offsets[-1].item())
        X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        ref = ref_grouped(X, W, offsets)
        if max_rows <= 256 and small_m:  # small-M path (bf16 and int8), every schedule
            for impl in SMALL_M_IMPLS:
                dk.set_small_m_impl(impl)
                sfx = "" if impl == "stream" else f"_{impl}"
                Y = poisoned(M, N)
                dk.grouped_gemm_masked(X, W, Y, offsets=offsets, max_rows=max_rows, max_active=min(E, M))
                ok &= check(f"small_m_bf16{sfx}/" + label, rel_err(Y, ref))
                Y = poisoned(M, N)
                dk.grouped_gemm_masked(X, Wq, Y, offsets=offsets, max_rows=max_rows, max_active=min(E, M), scales=Ws)
                ok &= check(f"small_m_w8a16{sfx}/" + label, rel_err(Y, ref_grouped(X, Wq, offsets, Ws)))
                if max_rows > 8:  # a hint below the real count: several passes per expert
                    Y = poisoned(M, N)
                    dk.grouped_gemm_masked(X, W, Y, offsets=offsets, max_rows=8, max_active=min(E, M))
                    ok &= check(f"small_m_bf16{sfx}_multipass/" + label, rel_err(Y, ref))
                    if impl in ("legacy", "pair"):  # int8 at depth 4, wide tiles
                        dk.set_small_m_depth(4)
                        Y = poisoned(M, N)
                        dk.grouped_gemm_masked(X, Wq, Y, offsets=offsets, max_rows=max_rows, max_active=min(E, M),
                                               scales=Ws)
                        dk.set_small_m_depth(0)
                        ok &= check(f"small_m_w8a16_{impl}_depth4/" + label, rel_err(Y, ref_grouped(X, Wq, offsets, Ws)))
                elif impl in ("legacy", "pair"):  # depth 4; one and four row blocks per CTA
                    knobs = [("depth4", dk.set_small_m_depth, 4, 0), ("rb1", dk.set_small_m_rb, 1, 0),
                             ("rb4", dk.set_small_m_rb, 4, 0)]
                    if impl == "pair":  # L2 prefetch of whole rows / none (default: at most 40 MiB per launch)
                        knobs += [("prefetch", dk.set_small_m_prefetch_mb, 1 << 20, 40),
                                  ("noprefetch", dk.set_small_m_prefetch_mb, 0, 40)]
                    for name, knob, v, reset in knobs:
                        knob(v)
                        Y = poisoned(M, N)
                        dk.grouped_gemm_masked(X, W, Y, offsets=offsets, max_rows=max_rows, max_active=min(E, M))
                        ok &= check(f"small_m_bf16_{impl}_{name}/" + label, rel_err(Y, ref))
                        if name in ("depth4", "noprefetch"):  # int8 variants that are benchmarked too
                            Y = poisoned(M, N)
                            dk.grouped_gemm_masked(X, Wq, Y, offsets=offsets, max_rows=max_rows, max_active=min(E, M),
                                                   scales=Ws)
                            ok &= check(f"small_m_w8a16_{impl}_{name}/" + label, rel_err(Y, ref_grouped(X, Wq, offsets, Ws)))
                        knob(reset)
                else:  # stream schedule launched with PDL
                    dk.set_small_m_pdl(True)
                    Y = poisoned(M, N)
                    dk.grouped_gemm_masked(X, W, Y, offsets=offsets, max_rows=max_rows, max_active=min(E, M))
                    dk.set_small_m_pdl(False)
                    ok &= check("small_m_bf16_pdl/" + label, rel_err(Y, ref))
            dk.set_small_m_impl("stream")
        if contiguous:
            ok &= check_contiguous(label, X, W, offsets, ref)[0]
    return ok


def test_fused_silu(gen, tokens=(1, 8, 64, 1024), small_m=True):
    """gate_up GEMM with silu(gate) * up in the epilogue (weights interleaved by 8 rows).
    small_m=False: the contiguous kernel only (T > 16), both epilogues."""
    ok = True
    for model, (H, I, E, k) in SHAPES.items():
        W = torch.randn(E, 2 * I, H, dtype=torch.bfloat16, device="cuda", generator=gen)
        Wi = dk.interleave_gate_up(W)
        ok &= check(f"interleave/{model}", 0.0 if torch.equal(Wi.view(E, I // 8, 2, 8, H)[:, :, 0], W[:, :I].view(E, I // 8, 8, H)) and
                    torch.equal(Wi.view(E, I // 8, 2, 8, H)[:, :, 1], W[:, I:].view(E, I // 8, 8, H)) else 1.0)
        if small_m:  # int8 weights for the small-M kernel
            q, s = dk.quantize_int8_rows(W.view(E * 2 * I, H))
            q, s = q.view(E, 2 * I, H), s.view(E, 2 * I)
            qi, si = dk.interleave_gate_up(q), dk.interleave_gate_up(s.view(E, 2 * I, 1)).view(E, 2 * I)
        for T in tokens:
            if T <= 16 and not small_m:
                continue
            _, _, offsets = group_rows(route(T, E, k, "zipf", gen), E)
            M = T * k
            X = torch.randn(M, H, dtype=torch.bfloat16, device="cuda", generator=gen)
            h = ref_grouped(X, W, offsets)
            ref = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
            if small_m and T <= 64:
                hq = ref_grouped(X, q, offsets, s)
                refq = torch.nn.functional.silu(hq[:, :I]) * hq[:, I:]
            if T > 16:  # the layer's entry takes the wgmma kernel: both epilogues
                for epi in CONTIG_EPILOGUES:
                    dk.set_contig_epilogue(epi)
                    Y = poisoned(M, I)
                    dk.moe_grouped_gemm(X, Wi, Y, offsets, T, fuse_silu=True)
                    ok &= check(f"fused_silu/{model}/T{T}/contiguous" + ("" if epi == "direct" else f"_{epi}"),
                                rel_err(Y, ref))
                dk.set_contig_epilogue("staged")
            for impl in (SMALL_M_IMPLS if T <= 16 else ("stream",)) if small_m else ():
                dk.set_small_m_impl(impl)
                if T <= 16:
                    Y = poisoned(M, I)
                    dk.moe_grouped_gemm(X, Wi, Y, offsets, T, fuse_silu=True)
                    path = "small_m" if impl == "stream" else f"small_m_{impl}"
                    ok &= check(f"fused_silu/{model}/T{T}/{path}", rel_err(Y, ref))
                if T <= 64:
                    Y = poisoned(M, I)
                    dk.grouped_gemm_masked(X, qi, Y, offsets=offsets, max_rows=T, max_active=min(E, M), scales=si,
                                           fuse_silu=True)
                    ok &= check(f"fused_silu_w8a16/{model}/T{T}/{impl}", rel_err(Y, refq))
            dk.set_small_m_impl("stream")
    return ok


def test_masked_layout_graph(gen):
    """Decode under a CUDA graph: masked layout from moe_align, new routing each replay."""
    ok = True
    H, I, E, k = SHAPES["qwen3-30b-a3b"]
    T = 8
    W = torch.randn(E, 2 * I, H, dtype=torch.bfloat16, device="cuda", generator=gen)
    ids = torch.zeros(T, k, dtype=torch.int32, device="cuda")
    X = torch.randn(T, H, dtype=torch.bfloat16, device="cuda", generator=gen)
    counts = torch.empty(E, dtype=torch.int32, device="cuda")
    slot_row = torch.empty(T * k, dtype=torch.int32, device="cuda")
    Xp = torch.zeros(E * T, H, dtype=torch.bfloat16, device="cuda")
    Y = torch.zeros(E * T, 2 * I, dtype=torch.bfloat16, device="cuda")
    for impl, pdl in (("stream", False), ("stream", True), ("legacy", False), ("pair", False)):  # fixed at capture
        name = impl + ("_pdl" if pdl else "")
        dk.set_small_m_impl(impl)
        dk.set_small_m_pdl(pdl)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                dk.moe_align(ids, E, cap=T, out=(counts, None, slot_row))
                dk.moe_permute(X, slot_row, k, Xp)
                dk.grouped_gemm_masked(Xp, W, Y, counts=counts, cap=T, max_rows=T, max_active=min(E, T * k))
        dk.set_small_m_impl("stream")
        dk.set_small_m_pdl(False)
        for trial in range(3):
            ids.copy_(route(T, E, k, "zipf" if trial else "uniform", gen))
            X.copy_(torch.randn(T, H, dtype=torch.bfloat16, device="cuda", generator=gen))
            Y.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            ref = torch.einsum("th,tjnh->tjn", X.float(), W[ids.long()].float())  # [T, k, N]
            got = Y[slot_row.long()].view(T, k, 2 * I)
            ok &= check(f"graph_masked_decode_{name}/trial{trial}", rel_err(got, ref))
            rows_ok = bool((slot_row // T == ids.flatten()).all().item())
            ok &= check(f"graph_masked_rows_{name}/trial{trial}", 0.0 if rows_ok else 1.0)
        del g
    return ok


def test_contiguous_graph(gen):
    """The wgmma kernel replayed from a CUDA graph with new routing each replay, twice per graph launch (gate_up then
    down on its output, as a layer runs them): the dynamic schedule's counter slots must be back at zero after every
    launch, or a replay would skip tiles (rows left NaN). Both schedules, both tail shapes."""
    ok = True
    H, I, E, k = SHAPES["qwen3-30b-a3b"]
    T = 1024
    M = T * k
    Wgu = torch.randn(E, 2 * I, H, dtype=torch.bfloat16, device="cuda", generator=gen) * 0.05
    Wd = torch.randn(E, H, I, dtype=torch.bfloat16, device="cuda", generator=gen) * 0.05
    X = torch.randn(M, H, dtype=torch.bfloat16, device="cuda", generator=gen)
    Xd = torch.randn(M, I, dtype=torch.bfloat16, device="cuda", generator=gen)
    offsets = torch.zeros(E + 1, dtype=torch.int32, device="cuda")
    A = torch.empty(M, 2 * I, dtype=torch.bfloat16, device="cuda")
    Y = torch.empty(M, H, dtype=torch.bfloat16, device="cuda")
    for dynamic, half, pp in ((True, True, False), (True, False, False), (False, True, False), (True, True, True),
                              (False, False, True), (True, True, "pairs"), (False, True, "pairs"), (True, True, "swap"),
                              (False, False, "swap")):
        name = ("swap_tails_" if pp == "swap" else f"pingpong_{pp}_" if pp == "pairs" else "pingpong_" if pp else "") + \
            ("dynamic" if dynamic else "static") + ("_half_tails" if half else "_full_tails")
        dk.set_contig_dynamic(dynamic)  # fixed at capture
        dk.set_contig_half_tails("on" if half else "off")
        dk.set_contig_pingpong("on" if pp in (True, "pairs") else "off")
        dk.set_contig_pairs("on" if pp == "pairs" else "off")
        dk.set_contig_swap_tails("on" if pp == "swap" else "off")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                dk.grouped_gemm_contiguous(X, Wgu, A, offsets)
                dk.grouped_gemm_contiguous(Xd, Wd, Y, offsets)
        dk.set_contig_dynamic(True)  # the library defaults
        dk.set_contig_half_tails("auto")
        dk.set_contig_pingpong("auto")
        dk.set_contig_pairs("auto")
        dk.set_contig_swap_tails("auto")
        for trial in range(3):
            _, _, offs = group_rows(route(T, E, k, "zipf" if trial == 1 else "uniform", gen), E)
            offsets.copy_(offs)
            X.copy_(torch.randn(M, H, dtype=torch.bfloat16, device="cuda", generator=gen))
            Xd.copy_(torch.randn(M, I, dtype=torch.bfloat16, device="cuda", generator=gen))
            A.fill_(float("nan"))
            Y.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            ok &= check(f"contiguous_graph_{name}/gate_up/trial{trial}", rel_err(A, ref_grouped(X, Wgu, offsets)))
            ok &= check(f"contiguous_graph_{name}/down/trial{trial}", rel_err(Y, ref_grouped(Xd, Wd, offsets)))
        del g
    return ok


def test_small_m_edges(gen):
    """Small-M schedules on shapes the models don't have: fewer work units than CTAs (most CTAs
    idle), 300 and 512 experts (two experts per scanning thread), an expert with more rows than the
    tile (passes), K = one chunk, masked layout with gaps; bf16 and int8, plain and fused SiLU."""
    ok = True
    cases = [  # (E, N, K, T, k)
        (4, 32, 128, 1, 1), (4, 32, 128, 3, 2), (300, 48, 384, 16, 4), (512, 64, 256, 8, 8), (512, 16, 128, 64, 8),
        (2, 4096, 1024, 64, 2), (16, 2048, 768, 1, 8), (128, 1536, 2048, 8, 8),
    ]
    for E, N, K, T, k in cases:
        W = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        q, sc = dk.quantize_int8_rows(W.view(E * N, K))
        Wq, Ws = q.view(E, N, K), sc.view(E, N)
        Wi = dk.interleave_gate_up(W)
        for kind in ("uniform", "zipf"):
            _, counts, offsets = group_rows(route(T, E, k, kind, gen), E)
            M = T * k
            X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
            ref = ref_grouped(X, W, offsets)
            refq = ref_grouped(X, Wq, offsets, Ws)
            refs = torch.nn.functional.silu(ref[:, :N // 2]) * ref[:, N // 2:]
            max_rows = int(counts.max().item())
            # masked layout: expert e's rows at e*cap, rows past counts[e] must stay untouched
            cap = max_rows + 3
            Xm = torch.zeros(E * cap, K, dtype=torch.bfloat16, device="cuda")
            dst = (torch.arange(E, device="cuda").repeat_interleave(counts.long()) * cap
                   + torch.arange(M, device="cuda") - offsets[:-1].long().repeat_interleave(counts.long()))
            Xm[dst] = X
            label = f"E{E}/N{N}/K{K}/T{T}/k{k}/{kind}"
            for impl in SMALL_M_IMPLS:
                dk.set_small_m_impl(impl)
                for hint in sorted({max_rows, 8}):
                    Y = poisoned(M, N)
                    dk.grouped_gemm_masked(X, W, Y, offsets=offsets, max_rows=hint, max_active=min(E, M))
                    ok &= check(f"edge_bf16_{impl}/{label}/hint{hint}", rel_err(Y, ref))
                Y = poisoned(M, N)
                dk.grouped_gemm_masked(X, Wq, Y, offsets=offsets, max_rows=max_rows, max_active=min(E, M), scales=Ws)
                ok &= check(f"edge_w8a16_{impl}/{label}", rel_err(Y, refq))
                Y = poisoned(M, N // 2)
                dk.grouped_gemm_masked(X, Wi, Y, offsets=offsets, max_rows=max_rows, max_active=min(E, M), fuse_silu=True)
                ok &= check(f"edge_fused_silu_{impl}/{label}", rel_err(Y, refs))
                Ym = poisoned(E * cap, N)
                dk.grouped_gemm_masked(Xm, W, Ym, counts=counts, cap=cap, max_rows=max_rows, max_active=min(E, M))
                untouched = torch.ones(E * cap, dtype=torch.bool, device="cuda")
                untouched[dst] = False
                ok &= check(f"edge_masked_{impl}/{label}", rel_err(Ym[dst], ref))
                ok &= check(f"edge_masked_untouched_{impl}/{label}", 0.0 if bool(Ym[untouched].isnan().all().item()) else 1.0)
            dk.set_small_m_impl("stream")
    return ok


def test_contiguous_edges(gen):
    """The wgmma kernel on groups the model shapes don't make: sizes around the 128-row tile (1, 127,
    128, 129, 255, 300) and the 64-row half tile (63, 64, 65, 192, 193, 320), empty experts (first, middle, last, all), rows before offsets[0] and after
    offsets[E] that belong to no group (they must stay NaN: nothing may be written outside
    [offsets[e], offsets[e+1])), N not a multiple of the 256-wide tile (partial 64-column chunks), K
    not a multiple of 64, and fused SiLU on the same groups; both epilogues."""
    ok = True
    cases = [  # (N, K, counts, rows before, rows after)
        (256, 64, [129], 0, 200), (400, 200, [0, 1, 127, 128, 129, 0], 5, 131), (784, 1024, [255, 0, 0, 64, 65, 300], 0, 0),
        (2048, 768, [0, 0, 0, 3], 128, 1), (4096, 512, [40, 0, 1000, 17], 1, 64), (528, 2048, [0, 0, 0], 9, 4),
        (16, 64, [1, 2, 300], 0, 127),
        # tails of 63, 64 and 65 rows after whole tiles (half tiles and not), N = 384: the second output tile's
        # half tiles give the second warpgroup columns 384-511, all past N
        (384, 768, [192, 193, 63, 320, 0, 1], 3, 2), (2048, 2048, [64, 191, 128, 65], 0, 0),
        # swapped tails: experts of <= 32 rows (16- and 32-wide MMAs), 129-160 (joined to the last whole tile),
        # 161 and 289 (a 33-row tail: a half tile), 257-288 and 385-416 (joined to the second or third whole tile),
        # N = 400: the second output tile's last 64-output MMA past N
        (400, 640, [1, 16, 17, 32, 33, 129, 144, 145, 160, 161, 288, 289, 0, 31], 2, 5),
        (512, 2048, [150, 20, 130, 8, 256, 272, 257, 258, 273, 415, 416], 0, 7),
    ]
    for N, K, counts, lead, tail in cases:
        E = len(counts)
        W = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        Wi = dk.interleave_gate_up(W)
        total = sum(counts)
        M = lead + total + tail
        offsets = torch.tensor([lead + sum(counts[:e]) for e in range(E + 1)], dtype=torch.int32, device="cuda")
        X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        label = f"N{N}/K{K}/counts{'-'.join(map(str, counts))}/lead{lead}/tail{tail}"
        h = ref_grouped(X, W, offsets)
        I = N // 2
        for fuse, Wk, ref, fam in ((False, W, h, "contiguous_edge"),
                                   (True, Wi, torch.nn.functional.silu(h[:, :I]) * h[:, I:], "contiguous_edge_silu")):
            good, out = check_contiguous(label, X, Wk, offsets, ref, fuse_silu=fuse, family=fam,
                                         rows=slice(lead, lead + total))
            ok &= good
            for epi, Y in out.items():
                sfx = "" if epi == "direct" else f"_{epi}"
                outside = torch.cat([Y[:lead], Y[lead + total:]])
                ok &= check(f"{fam}_untouched{sfx}/" + label, 0.0 if bool(outside.isnan().all().item()) else 1.0)
    return ok


def torch_router(logits, k, scoring, renorm, bias=None, groups=1, topk_groups=1, scale=1.0):
    s = logits.float().softmax(-1) if scoring == "softmax" else logits.float().sigmoid()
    choice = s + (bias if bias is not None else 0)
    if groups > 1:
        T, E = s.shape
        gs = choice.view(T, groups, E // groups).topk(2, -1).values.sum(-1)
        keep = torch.zeros_like(gs).scatter_(1, gs.topk(topk_groups, -1).indices, 1.0)
        choice = choice.masked_fill(keep.repeat_interleave(E // groups, 1) == 0, float("-inf"))
    ids = choice.topk(k, -1).indices
    w = s.gather(1, ids)
    if renorm:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return ids.int(), w * scale


def test_router(gen):
    ok = True
    cases = [("mixtral", 8, 2, "softmax", True, 1, 1, 1.0), ("olmoe", 64, 8, "softmax", False, 1, 1, 1.0),
             ("qwen3", 128, 8, "softmax", True, 1, 1, 1.0), ("deepseek-moe-16b", 64, 6, "softmax", False, 1, 1, 1.0),
             ("deepseek-v3", 256, 8, "sigmoid", True, 8, 4, 2.5)]
    for name, E, k, scoring, renorm, groups, tg, scale in cases:
        logits = torch.randn(4096, E, device="cuda", generator=gen)
        bias = torch.randn(E, device="cuda", generator=gen) * 0.1 if groups > 1 else None
        ids, w = dk.router_topk(logits, k, scoring=scoring, renormalize=renorm, bias=bias, num_groups=groups,
                                topk_groups=tg, scale=scale)
        rids, rw = torch_router(logits, k, scoring, renorm, bias, groups, tg, scale)
        same = (ids.sort(-1).values == rids.sort(-1).values).float().mean().item()
        ok &= check(f"router/{name}/ids", 1.0 - same, tol=1e-3)
        ok &= check(f"router/{name}/weights", rel_err(w.gather(1, ids.long().argsort(-1)),
                                                     rw.gather(1, rids.long().argsort(-1))), tol=1e-5)
    return ok


def test_align(gen):
    """moe_align against torch: counts, offsets and the stable layout (an expert's rows in its slots' order, so a
    layout depends on the routing alone), contiguous and masked, uniform / zipf / one expert taking every slot, E = 1
    to 4,096 (fewer warps in the CTA as the per-warp table grows), M = 0 to 131,072; and the same bits on a rerun.
    The launcher's rule (family align: one CTA per 8,192 slots, up to a cluster of 8) and forced clusters of 1, 3
    and 8 CTAs at every size (DK_ALIGN_CLUSTER, families align_c1 / _c3 / _c8: at small M most warps get no slot)."""
    ok = True
    for ctas in (None, 1, 3, 8):
        if ctas is not None:
            os.environ["DK_ALIGN_CLUSTER"] = str(ctas)
        try:
            ok &= align_cases(gen, "align" if ctas is None else f"align_c{ctas}")
        finally:
            os.environ.pop("DK_ALIGN_CLUSTER", None)
    return ok


def align_cases(gen, family):
    ok = True
    cases = [(0, 128, 8, "uniform"), (1, 128, 8, "uniform"), (5, 8, 2, "zipf"), (64, 128, 8, "zipf"),
             (1000, 64, 6, "uniform"), (8192, 128, 8, "uniform"), (8192, 128, 8, "zipf"), (16384, 8, 2, "zipf"),
             (4096, 256, 8, "uniform"), (2048, 1, 1, "uniform"), (3000, 4096, 8, "uniform"), (700, 1300, 4, "zipf"),
             (500, 128, 8, "one"), (16384, 1204, 8, "uniform"), (16384, 1205, 8, "zipf")]
    for T, E, k, routing in cases:
        if T == 0:
            ids = torch.empty(0, k, dtype=torch.int32, device="cuda")
        elif routing == "one":
            ids = torch.zeros(T, k, dtype=torch.int32, device="cuda")
            ids += torch.arange(k, dtype=torch.int32, device="cuda")  # k distinct experts, the same for every token
        else:
            ids = route(T, E, k, routing, gen)
        flat = ids.flatten().long()
        M = flat.numel()
        ref_counts = torch.bincount(flat, minlength=E).to(torch.int32)
        ref_offsets = torch.zeros(E + 1, dtype=torch.int32, device="cuda")
        ref_offsets[1:] = torch.cumsum(ref_counts, 0)
        order = torch.argsort(flat, stable=True)  # slots by expert, in slot order inside each expert
        rank = torch.empty(M, dtype=torch.int64, device="cuda")
        rank[order] = torch.arange(M, device="cuda") - ref_offsets[flat[order]].long()
        for cap in (0, max(T, 1)):
            counts, offsets, slot_row = dk.moe_align(ids, E, cap=cap)
            _, _, again = dk.moe_align(ids, E, cap=cap)
            want = (ref_offsets[flat].long() if cap == 0 else flat * cap) + rank
            bad = int((slot_row.long() != want).sum().item()) + int((counts != ref_counts).sum().item())
            if cap == 0:
                bad += int((offsets != ref_offsets).sum().item())
            bad += int((again != slot_row).sum().item())
            ok &= check(f"{family}/{'masked' if cap else 'contiguous'}/T{T}/E{E}/k{k}/{routing}", float(bad), tol=0.0)
    return ok


def test_moe_layer(gen, tokens=(1, 8, 16, 17, 64, 1024), epilogue="direct"):
    """Router -> align -> permute -> gate_up -> silu*up -> down -> weighted unpermute vs fp32 torch.
    epilogue: the wgmma kernel's (T > 16)."""
    ok = True
    dk.set_contig_epilogue(epilogue)
    sfx = "" if epilogue == "direct" else f"_{epilogue}"
    for model in ("qwen3-30b-a3b", "mixtral-8x7b"):
        H, I, E, k = SHAPES[model]
        W1 = torch.randn(E, 2 * I, H, dtype=torch.bfloat16, device="cuda", generator=gen) * H ** -0.5
        W2 = torch.randn(E, H, I, dtype=torch.bfloat16, device="cuda", generator=gen) * I ** -0.5
        for T in tokens:
            X = torch.randn(T, H, dtype=torch.bfloat16, device="cuda", generator=gen)
            logits = torch.randn(T, E, device="cuda", generator=gen)
            ids, w = dk.router_topk(logits, k)
            counts, offsets, slot_row = dk.moe_align(ids, E)
            M = T * k
            Xp = torch.empty(M, H, dtype=torch.bfloat16, device="cuda")
            dk.moe_permute(X, slot_row, k, Xp)
            h = torch.empty(M, 2 * I, dtype=torch.bfloat16, device="cuda")
            act = torch.empty(M, I, dtype=torch.bfloat16, device="cuda")
            Y = torch.empty(M, H, dtype=torch.bfloat16, device="cuda")
            out = torch.empty(T, H, dtype=torch.bfloat16, device="cuda")
            gemm = lambda a, b, c: dk.moe_grouped_gemm(a, b, c, offsets, T)  # noqa: E731
            gemm(Xp, W1, h)
            dk.silu_mul(h, act)
            gemm(act, W2, Y)
            dk.moe_unpermute(Y, slot_row, w, out)
            ref = torch.zeros(T, H, dtype=torch.float32, device="cuda")
            for e in ids.unique().tolist():  # fp32 MoE, expert by expert
                t_idx, j_idx = (ids == e).nonzero(as_tuple=True)
                hf = X[t_idx].float() @ W1[e].float().t()
                a = torch.nn.functional.silu(hf[:, :I]) * hf[:, I:]
                ref.index_add_(0, t_idx, (a @ W2[e].float().t()) * w[t_idx, j_idx][:, None])
            ok &= check(f"moe_layer{sfx}/{model}/T{T}", rel_err(out, ref), tol=2e-2)
    dk.set_contig_epilogue("staged")  # the library default
    return ok


def test_quantize(gen):
    ok = True
    E, N, K = 8, 512, 2048
    W = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    W[0, 0] = 0  # an all-zero channel
    q, s = dk.quantize_int8_rows(W.view(E * N, K))
    amax = W.float().abs().amax(-1).view(-1)
    rs = amax / 127
    rq = torch.where(amax[:, None] > 0, torch.round(W.view(E * N, K).float() * (127 / amax.clamp_min(1e-30))[:, None]),
                     torch.zeros(1, device="cuda")).clamp(-127, 127)
    ok &= check("quantize/scales", rel_err(s, rs), tol=1e-6)
    ok &= check("quantize/values_max_abs_diff", (q.float() - rq).abs().max().item(), tol=1.0)
    qs, ss = dk.quantize_int8_streaming(W.cpu())
    ok &= check("quantize/streaming_equals_device", float((qs.view(E * N, K) != q).sum().item() + (ss.view(-1) != s).sum().item()), tol=0.0)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--json")
    ap.add_argument("--expect-fail", action="store_true")
    ap.add_argument("--decode", action="store_true", help="decode subset: T = 1, 8, 64, small-M edges, graph, layer")
    ap.add_argument("--prefill", action="store_true", help="the contiguous (wgmma) kernel only, both epilogues")
    ap.add_argument("--w8", action="store_true",
                    help="the swap-AB tensor-core kernels only (gpu_swapab.py: W8A16 and bf16 swap-AB)")
    args = ap.parse_args()
    global EXPECT_FAIL
    EXPECT_FAIL = args.expect_fail
    dk.load(args.lib)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    if args.expect_fail and args.w8:
        test_w8a16_wgmma(gen, check, tokens=(1, 64, 1024), expect_fail=True)
        test_bf16_swapab(gen, check, tokens=(1, 64), expect_fail=True)
    elif args.expect_fail:
        if args.prefill:
            test_grouped_gemms(gen, tokens=(64, 1024), small_m=False)
            test_contiguous_edges(gen)
        else:
            test_grouped_gemms(gen, tokens=(1, 64) if args.decode else (1, 64, 1024), contiguous=not args.decode)
        if args.decode:
            test_small_m_edges(gen)
            test_pdl_chain(gen, check, expect_fail=True)
        test_w8a16_wgmma(gen, check, tokens=(1, 64) if args.decode else (64, 1024), expect_fail=True)
        test_bf16_swapab(gen, check, tokens=(1, 64), expect_fail=True)
    if args.expect_fail:
        n_fail = sum(not r["ok"] for r in results)
        # every kernel family (name up to the first "/") must fail somewhere, not just one of them
        fams = {}
        for r in results:
            f = r["test"].split("/")[0]
            fams.setdefault(f, [0, 0])
            fams[f][0] += not r["ok"]
            fams[f][1] += 1
        missed = sorted(f for f, (bad, _) in fams.items() if bad == 0 and "untouched" not in f)
        caught = n_fail > 0 and not missed
        print(f"mutation (expert index off by one): {n_fail}/{len(results)} GEMM checks failed; per family "
              + ", ".join(f"{f}={b}/{n}" for f, (b, n) in sorted(fams.items()))
              + f" -> caught={caught}" + (f"; NOT caught by {missed}" if missed else ""))
        summary = {"mutation": "expert_off_by_one", "caught": caught, "failed": n_fail, "total": len(results),
                   "families": fams, "missed": missed}
        if args.json:
            json.dump(summary, open(args.json, "w"), indent=1)
        sys.exit(0 if caught else 1)
    ok = True
    if args.w8:
        tests = (lambda g: test_w8a16_wgmma(g, check), lambda g: test_bf16_swapab(g, check))
    elif args.decode:
        tests = (test_align, lambda g: test_fused_silu(g, tokens=(1, 8, 64)), test_masked_layout_graph, test_small_m_edges,
                 lambda g: test_moe_layer(g, tokens=(1, 8, 16, 17, 64)), lambda g: test_pdl_chain(g, check),
                 lambda g: test_grouped_gemms(g, tokens=(1, 8, 64)),
                 lambda g: test_w8a16_wgmma(g, check, tokens=(1, 8, 17, 64)),
                 lambda g: test_bf16_swapab(g, check, tokens=(1, 8, 17, 64)))
    elif args.prefill:
        tests = (test_align, test_contiguous_edges, test_contiguous_graph,
                 lambda g: test_fused_silu(g, tokens=(64, 1024, 4096), small_m=False),
                 lambda g: test_moe_layer(g, tokens=(17, 64, 1024)),
                 lambda g: test_moe_layer(g, tokens=(17, 64, 1024), epilogue="staged"),
                 lambda g: test_grouped_gemms(g, tokens=(64, 256, 1024, 4096), small_m=False),
                 lambda g: test_w8a16_wgmma(g, check, tokens=(64, 256, 1024, 4096)))
    else:
        tests = (test_router, test_align, test_quantize, test_fused_silu, test_masked_layout_graph, test_small_m_edges,
                 test_moe_layer, lambda g: test_moe_layer(g, tokens=(17, 1024), epilogue="staged"), test_contiguous_edges,
                 test_contiguous_graph,
                 test_grouped_gemms, lambda g: test_w8a16_wgmma(g, check), lambda g: test_bf16_swapab(g, check))
    for t in tests:
        try:
            ok &= t(gen)
        except Exception as e:  # report and keep going: one run on the device must say everything
            print(f"ERROR {getattr(t, '__name__', t)}: {e!r}", flush=True)
            traceback.print_exc()
            results.append({"test": str(getattr(t, "__name__", t)), "ok": False, "error": repr(e)})
            ok = False
    n_ok = sum(r["ok"] for r in results)
    worst = {}
    for r in results:
        fam = r["test"].split("/")[0]
        worst[fam] = max(worst.get(fam, 0.0), r.get("rel_err", float("inf")))
    if args.json:
        json.dump({"passed": n_ok, "total": len(results), "worst_by_family": worst, "results": results},
                  open(args.json, "w"), indent=1)
    print(f"gpu tests: {n_ok}/{len(results)} passed; worst rel err by family: "
          + ", ".join(f"{k}={v:.2e}" for k, v in worst.items()))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
