"""Grouped-GEMM benchmark for issue 5 (run on the H200): dispatch's kernels against
torch._grouped_mm (CUTLASS), a loop of cuBLAS GEMMs per expert, one dense cuBLAS GEMM of equal
FLOPs, and the HBM read ceiling measured in the same run.

Timing: every method is captured in a CUDA graph of R launches (weights rotated over enough copies
that the L2 never holds them), each replay timed with CUDA events; the median replay / R is reported. Since
session 8 all methods of a configuration are captured first and their replays timed in interleaved rounds
(GraphSet), so none gains from running first after a pause.

The default rows (session 9): the shipped bf16 entry (`dispatch_entry`), the W8A16 tensor-core GEMM
(`dispatch_w8a16_wgmma`), torch._grouped_mm, the cuBLAS loop, dense cuBLAS, and at T <= 64 one torch reduction over
the same weight bytes (`read_same_bytes`: what a single launch of that many bytes reaches). --variants adds the
alternatives earlier sessions measured (small-M schedules, epilogues, PDL, SiLU fused or not).

Usage: python3 bench/kernels/bench.py --out results.json [--tokens 1,64] [--models olmoe,...] [--routings uniform]
       [--decode]   (T = 1, 8, 64 by default; legacy and pair small-M schedules, int8 legacy at depth 4, wgmma,
                     torch._grouped_mm only)
       [--prefill]  (T = 4096, 16384 by default; the wgmma kernel with the direct (dispatch_contiguous) and the
                     staged (variant_contiguous_staged) epilogue, fused SiLU with each on gate_up,
                     torch._grouped_mm and dense cuBLAS of equal FLOPs; no int8, no cuBLAS loop)
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))
import dk  # noqa: E402
from moe_shapes import ROUTINGS, SHAPES, TOKENS, group_rows, projections, route, row_tiles  # noqa: E402

L2_BYTES = 50 * 2**20
DECODE = False  # --decode: fewer methods, shorter timing
VARIANTS = False  # --variants: also the small-M schedules, the direct epilogue, no-PDL and the SiLU layer rows
PREFILL = False  # --prefill: the wgmma kernel's epilogues against torch._grouped_mm and dense cuBLAS
TIME_S = 0.12  # replay time per method (--decode: 0.04, --prefill: 0.05)


def time_graph(launches, est_s):
    """launches: callables (one per weight copy). Returns median microseconds per launch (one method alone;
    GraphSet below times several side by side)."""
    graphs = GraphSet()
    graphs.add("m", launches, est_s)
    return graphs.time()["m"]


class GraphSet:
    """Several methods timed side by side: each is captured as time_graph captures it, then the replays run in
    interleaved rounds (the order rotated every round), so every method sees the same clock and power state.
    Timing one method after another favoured whichever ran first after a pause: on the H200 in session 8 the
    same W8A16 configuration measured as the first method and as a later one differed by up to 10 points of
    HBM share (conversion-bound kernels follow the SM clock)."""

    def __init__(self):
        self.graphs = {}  # name -> (graph, stream, launches per replay, rounds wanted)

    def add(self, name, launches, est_s):
        R = max(1, min(64, int(2e-3 / max(est_s, 1e-7))))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())  # the inputs were written on the default stream
        with torch.cuda.stream(s):
            for f in launches:  # warm up (module load, handles) outside the graph
                f()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                for i in range(R):
                    launches[i % len(launches)]()
            g.replay()
        torch.cuda.synchronize()
        self.graphs[name] = (g, s, R, max(5, min(40, int(TIME_S / (R * max(est_s, 1e-7))))))

    def time(self):
        """Median microseconds per launch of every method added, then the graphs are released."""
        names = list(self.graphs)
        rounds = max((v[3] for v in self.graphs.values()), default=0)
        times = {n: [] for n in names}
        for k in range(rounds):
            for j in range(len(names)):
                n = names[(j + k) % len(names)]
                g, s, R, _ = self.graphs[n]
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(s):  # a replay runs on the current stream: the events must be on it too
                    a.record(s)
                    g.replay()
                    b.record(s)
                b.synchronize()
                times[n].append(a.elapsed_time(b) * 1e3 / R)
        self.graphs.clear()
        return {n: sorted(t)[len(t) // 2] for n, t in times.items()}


def hbm_read_ceiling():
    """Best of a few full reads of 4 GiB (sum reductions), in bytes/s."""
    x = torch.randn(2**31, device="cuda", dtype=torch.bfloat16)
    best = 0.0
    for f in (lambda: x.sum(dtype=torch.float32), lambda: x.view(torch.int32).max()):
        f()
        torch.cuda.synchronize()
        us = time_graph([f], 1e-3)
        best = max(best, x.numel() * 2 / (us * 1e-6))
    del x
    return best


def dense_tflops():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    us = time_graph([lambda: a @ b], 1.5e-3)
    return 2 * 8192**3 / (us * 1e-6) / 1e12


def bench_config(model, proj, N, K, E, k, T, kind, W_copies, Wq_copies, Ws, gen, ceiling):
    ids = route(T, E, k, kind, gen)
    _, counts, offsets = group_rows(ids, E)
    M = T * k
    cnt = counts.tolist()
    off = offsets.tolist()
    active = [e for e in range(E) if cnt[e] > 0]
    max_rows = max(cnt)
    X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    Y = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    flops = 2.0 * M * N * K
    act_bytes = M * K * 2 + M * N * 2
    w_bytes = len(active) * N * K * 2
    w8_bytes = len(active) * N * (K + 4)
    row = {"model": model, "proj": proj, "N": N, "K": K, "E": E, "top_k": k, "tokens": T, "routing": kind,
           "rows": M, "active_experts": len(active), "max_rows_per_expert": max_rows, "flops": flops,
           "bytes_bf16": w_bytes + act_bytes, "bytes_int8": w8_bytes + act_bytes, "us": {},
           # the prefill kernel's MMA work in 128-row tiles, with half tails and without (rows / 128 for dense)
           "row_tiles": row_tiles(cnt), "row_tiles_full": row_tiles(cnt, half_tails=False),
           "row_tiles_swap": row_tiles(cnt, swap_tails=True)}
    est = max((w_bytes + act_bytes) / 3.5e12, flops / 5e14)
    est8 = max((w8_bytes + act_bytes) / 3.5e12, flops / 3e14)

    graphs = GraphSet()  # every method captured first (with the switches set as below), then timed interleaved
    keep = []  # tensors a captured graph reads that the code below drops before the timing

    def run(name, fns, e):
        try:
            graphs.add(name, fns, e)
        except Exception as ex:  # a failing method is recorded, not fatal
            row.setdefault("errors", {})[name] = repr(ex)[:300]

    # Tile-width hint for the small-M kernel: from T, E and k only (no routing read on the host).
    hint = min(T, 2 * math.ceil(M / E) + 8)
    row["small_m_rows_hint"] = hint
    # the library default is "auto": legacy, int8 pair on large experts at T <= 8; the columns name each schedule
    row["small_m_default"] = "auto"
    pf_bytes = N * K * min(E, M)  # the pair schedule's L2 prefetch (grouped_gemm_small_m.cu): share of each row
    row["pair_prefetch_share"] = {"bf16": min(1.0, (40 << 20) / (2 * pf_bytes)), "int8": min(1.0, (40 << 20) / pf_bytes)}
    # What the library ships (session 9): the bf16 MoE entry (moe_grouped_gemm_bf16: swap-AB at 1-256 tokens where it
    # pays, small-M, the wgmma prefill kernel above; grouped_gemm.h) and the W8A16 tensor-core GEMM with the layer's
    # rows-per-expert hint (what native-cuda runs for int8 experts above one token)
    run("dispatch_entry", [lambda W=W: dk.moe_grouped_gemm(X, W, Y, offsets, T) for W in W_copies], est)
    if Wq_copies:
        w8_hint = 2 * math.ceil(M / E) + 8
        row["w8a16_rows_hint"] = w8_hint
        run("dispatch_w8a16_wgmma", [lambda Wq=Wq: dk.grouped_gemm_w8a16_contiguous(X, Wq, Ws, Y, offsets, w8_hint)
                                     for Wq in Wq_copies], est8)
    if T <= 64:  # one reduction kernel (torch amax) over the same weight bytes of the same copies: what one launch
        # of that many bytes reaches, the bound for a kernel whose transfer is this short
        n_read = len(active) * N * K // 2  # int32 words
        run("read_same_bytes", [lambda W=W: W.view(-1)[: 2 * n_read].view(torch.int32).amax() for W in W_copies],
            w_bytes / 3.5e12)
    if T <= 256 and VARIANTS:
        dk.set_small_m_impl("legacy")
        small = lambda W: dk.grouped_gemm_masked(X, W, Y, offsets=offsets, max_rows=hint, max_active=min(E, M))
        small8 = lambda Wq: dk.grouped_gemm_masked(X, Wq, Y, offsets=offsets, max_rows=hint, max_active=min(E, M),
                                                   scales=Ws)
        run("dispatch_small_m", [lambda W=W: small(W) for W in W_copies], est)
        run("dispatch_w8a16", [lambda Wq=Wq: small8(Wq) for Wq in Wq_copies], est8)
        if T <= 64:  # the pair schedule (two row blocks per warp item); the stream schedule (not under --decode)
            dk.set_small_m_impl("pair")
            run("variant_small_m_pair", [lambda W=W: small(W) for W in W_copies], est)
            run("variant_w8a16_pair", [lambda Wq=Wq: small8(Wq) for Wq in Wq_copies], est8)
            if T <= 8:  # the pair schedule without its L2 prefetch (default: at most 40 MiB per launch)
                dk.set_small_m_prefetch_mb(0)
                run("variant_small_m_pair_nopf", [lambda W=W: small(W) for W in W_copies], est)
                run("variant_w8a16_pair_nopf", [lambda Wq=Wq: small8(Wq) for Wq in Wq_copies], est8)
                dk.set_small_m_prefetch_mb(40)
            dk.set_small_m_depth(4)
            if not DECODE:  # lost to pair at depth 2 on every decode row but one (18:25 UTC run)
                dk.set_small_m_impl("pair")
                run("variant_w8a16_pair_d4", [lambda Wq=Wq: small8(Wq) for Wq in Wq_copies], est8)
            dk.set_small_m_impl("legacy")  # deeper pipeline, int8 only (bf16 at depth 4 lost in the 15:23 run)
            run("variant_w8a16_legacy_d4", [lambda Wq=Wq: small8(Wq) for Wq in Wq_copies], est8)
            dk.set_small_m_depth(0)
            if not DECODE:
                dk.set_small_m_impl("stream")
                run("variant_small_m_stream", [lambda W=W: small(W) for W in W_copies], est)
                run("variant_w8a16_stream", [lambda Wq=Wq: small8(Wq) for Wq in Wq_copies], est8)
            dk.set_small_m_impl("legacy")
    if T >= 8 and (VARIANTS or PREFILL):
        dk.set_contig_epilogue("direct")  # the earlier epilogue (the library default is staged since 20:19 UTC)
        run("dispatch_contiguous", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets) for W in W_copies], est)
        if PREFILL:  # the staged epilogue (shared memory, 16-byte row stores): the library default
            dk.set_contig_epilogue("staged")
            run("variant_contiguous_staged", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                              for W in W_copies], est)
            dk.set_contig_epilogue("stmatrix")  # the library default staging through stmatrix (session 20)
            run("variant_contiguous_stmatrix", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                for W in W_copies], est)
            dk.set_contig_epilogue("tma")  # and with TMA stores for the expert's whole 64-row chunks
            run("variant_contiguous_tma", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                           for W in W_copies], est)
            dk.set_contig_epilogue("staged")
            dk.set_contig_pingpong("off")  # the cooperative kernel for the variants below
            dk.set_contig_swap_tails("off")  # and without swapped tails (session 22) unless a variant says so
            run("variant_contiguous_swap_off", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                for W in W_copies], est)  # the cooperative default before session 22
            dk.set_contig_half_tails("off")  # every row tile 128 rows, as before session 17's half tails
            run("variant_contiguous_dynamic_full", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                    for W in W_copies], est)
            dk.set_contig_half_tails("on")  # half tails wherever a tail has <= 64 rows (auto leaves some out)
            run("variant_contiguous_dynamic_half", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                    for W in W_copies], est)
            dk.set_contig_half_tails("off")
            dk.set_contig_dynamic(False)  # and the static schedule: the kernel as session 16 left it
            run("variant_contiguous_static_full", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                   for W in W_copies], est)
            dk.set_contig_half_tails("auto")  # back to the library defaults
            dk.set_contig_dynamic(True)
            dk.set_contig_pingpong("on")  # the ping-pong kernel (each warpgroup on its own 128 x 128 tiles)
            run("variant_contiguous_pingpong", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                for W in W_copies], est)
            dk.set_contig_half_tails("off")  # the ping-pong kernel as session 17 ran it: 128-row tiles, static
            dk.set_contig_dynamic(False)
            run("variant_contiguous_pingpong_static_full", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                            for W in W_copies], est)
            dk.set_contig_half_tails("auto")
            dk.set_contig_dynamic(True)
            dk.set_contig_pairs("on")  # the ping-pong kernel in 2-CTA clusters sharing each token tile
            run("variant_contiguous_pingpong_pairs", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                      for W in W_copies], est)
            dk.set_contig_dynamic(False)
            run("variant_contiguous_pingpong_pairs_static", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                             for W in W_copies], est)
            dk.set_contig_dynamic(True)
            dk.set_contig_pairs("auto")
            dk.set_contig_pingpong("off")
            dk.set_contig_swap_tails("on")  # the cooperative kernel with swapped tails wherever they fit (session 22)
            run("variant_contiguous_swap_tails", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                  for W in W_copies], est)
            dk.set_contig_swap_tails("off")
            dk.set_contig_epilogue("none")  # the cooperative kernel without its epilogue: what the stores cost
            run("variant_contiguous_no_epilogue", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                                   for W in W_copies], est)
            dk.set_contig_pingpong("auto")  # back to the library default
            dk.set_contig_swap_tails("auto")
        dk.set_contig_epilogue("staged")  # back to the library default
        if T == 64 and not DECODE and VARIANTS:
            dk.set_pdl(False)
            run("variant_contiguous_nopdl", [lambda W=W: dk.grouped_gemm_contiguous(X, W, Y, offsets)
                                             for W in W_copies], est)
            dk.set_pdl(True)
    if proj == "gate_up" and (T in (1, 8, 64, 4096) or PREFILL) and (T <= 8 or not DECODE) and (VARIANTS or PREFILL):
        I = N // 2
        A = torch.empty(M, I, dtype=torch.bfloat16, device="cuda")

        def unfused(W):
            dk.moe_grouped_gemm(X, W, Y, offsets, T)
            dk.silu_mul(Y, A)

        run("layer_gate_up_then_silu", [lambda W=W: unfused(W) for W in W_copies], est)
        run("layer_gate_up_fused_silu", [lambda W=W: dk.moe_grouped_gemm(X, W, A, offsets, T, fuse_silu=True)
                                         for W in W_copies], est)
        if PREFILL and T > 16:
            dk.set_contig_epilogue("staged")
            run("layer_gate_up_fused_silu_staged", [lambda W=W: dk.moe_grouped_gemm(X, W, A, offsets, T, fuse_silu=True)
                                                    for W in W_copies], est)
            dk.set_contig_swap_tails("on")
            dk.set_contig_pingpong("off")
            run("layer_gate_up_fused_silu_swap_tails",
                [lambda W=W: dk.moe_grouped_gemm(X, W, A, offsets, T, fuse_silu=True) for W in W_copies], est)
            dk.set_contig_swap_tails("auto")
            dk.set_contig_pingpong("auto")
            dk.set_contig_epilogue("tma")
            run("layer_gate_up_fused_silu_tma", [lambda W=W: dk.moe_grouped_gemm(X, W, A, offsets, T, fuse_silu=True)
                                                 for W in W_copies], est)
            dk.set_contig_epilogue("staged")
            dk.set_contig_half_tails("off")
            dk.set_contig_dynamic(False)
            dk.set_contig_pingpong("off")
            dk.set_contig_swap_tails("off")
            run("layer_gate_up_fused_silu_static_full",
                [lambda W=W: dk.moe_grouped_gemm(X, W, A, offsets, T, fuse_silu=True) for W in W_copies], est)
            dk.set_contig_half_tails("auto")
            dk.set_contig_dynamic(True)
            dk.set_contig_pingpong("auto")
            dk.set_contig_swap_tails("auto")
        dk.set_contig_epilogue("staged")  # back to the library default
    offs = offsets[1:].contiguous()
    run("torch_grouped_mm", [lambda W=W: torch._grouped_mm(X, W.transpose(1, 2), offs=offs) for W in W_copies], est)

    if not DECODE and not PREFILL:
        def loop(W):
            for e in active:
                torch.mm(X[off[e]:off[e + 1]], W[e].t(), out=Y[off[e]:off[e + 1]])

        run("cublas_loop", [lambda W=W: loop(W) for W in W_copies], est)
    if not DECODE:
        Wd = torch.randn(N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        run("cublas_dense", [lambda: torch.mm(X, Wd.t(), out=Y)], flops / 6e14 + 2e-6)
        keep.append(Wd)
        del Wd
    row["us"] = graphs.time()
    keep.clear()
    # derived figures
    ours = {m: row["us"][m] for m in ("dispatch_small_m", "dispatch_contiguous") if m in row["us"]}
    if ours:
        best = min(ours, key=ours.get)
        row["dispatch_best"] = best
        row["us"]["dispatch_best"] = ours[best]
    row["tflops"] = {m: flops / (u * 1e-6) / 1e12 for m, u in row["us"].items()}
    row["bw_share"] = {m: (row["bytes_int8"] if "w8a16" in m else w_bytes if m == "read_same_bytes" else row["bytes_bf16"])
                       / (u * 1e-6) / ceiling for m, u in row["us"].items() if m != "cublas_dense" and not m.startswith("layer_")}
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--lib")
    ap.add_argument("--models", default=",".join(SHAPES))
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    ap.add_argument("--routings", default=",".join(ROUTINGS))
    ap.add_argument("--projs", default="gate_up,down")
    ap.add_argument("--budget-s", type=float, default=480)
    ap.add_argument("--decode", action="store_true", help="decode rows only (T = 1, 8, 64 unless --tokens), fewer methods")
    ap.add_argument("--prefill", action="store_true", help="prefill rows only (T = 4096, 16384 unless --tokens): "
                    "the wgmma kernel's two epilogues, torch._grouped_mm, dense cuBLAS")
    ap.add_argument("--variants", action="store_true", help="also the measured alternatives: small-M schedules "
                    "(legacy, pair, stream, depth 4), the direct prefill epilogue, no PDL, gate_up then SiLU vs fused")
    args = ap.parse_args()
    global DECODE, PREFILL, TIME_S, VARIANTS
    DECODE, PREFILL, VARIANTS = args.decode, args.prefill, args.variants
    if DECODE:
        TIME_S = 0.04
        if args.tokens == ",".join(map(str, TOKENS)):
            args.tokens = "1,8,64"
    if PREFILL:
        TIME_S = 0.05
        if args.tokens == ",".join(map(str, TOKENS)):
            args.tokens = "4096,16384"
    t0 = time.time()
    dk.load(args.lib)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    ceiling = hbm_read_ceiling()
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
           "hbm_read_ceiling_Bps": ceiling, "dense_bf16_8192_tflops": None if DECODE else dense_tflops(), "rows": []}
    print(f"ceiling {ceiling / 1e12:.2f} TB/s, dense 8192^3 {doc['dense_bf16_8192_tflops']} TFLOP/s", flush=True)
    tokens = [int(t) for t in args.tokens.split(",")]
    for model in args.models.split(","):
        H, I, E, k = SHAPES[model]
        for proj, N, K in projections(H, I):
            if proj not in args.projs.split(","):
                continue
            if time.time() - t0 > args.budget_s:
                doc["truncated"] = True
                break
            torch.cuda.empty_cache()
            W = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
            min_touched = min(E, k) * N * K * 2
            n_rot = max(1, min(8, math.ceil(3 * L2_BYTES / min_touched), int(40e9 // (E * N * K * 2))))
            W_copies = [W] + [W.clone() for _ in range(n_rot - 1)]
            if PREFILL:  # no int8 rows (T > 256)
                q = s = Wq = Ws = None
                Wq_copies = []
            else:
                q, s = dk.quantize_int8_rows(W.view(E * N, K))
                Wq, Ws = q.view(E, N, K), s.view(E, N)
                Wq_copies = [Wq] + [Wq.clone() for _ in range(min(8, 2 * n_rot) - 1)]
            for T in tokens:
                for kind in args.routings.split(","):
                    r = bench_config(model, proj, N, K, E, k, T, kind, W_copies, Wq_copies, Ws, gen, ceiling)
                    r["weight_copies"] = n_rot
                    doc["rows"].append(r)
                    json.dump(doc, open(args.out, "w"), indent=1)
                    u = r["us"]
                    print(f"{model:17s} {proj:7s} T={T:5d} {kind:7s} " + " ".join(
                        f"{m}={u[m]:.1f}" for m in u) + "  bw%=" + " ".join(
                        f"{m[:12]}:{100 * v:.0f}" for m, v in r["bw_share"].items()), flush=True)
            del W_copies, Wq_copies, W, q, s, Wq, Ws
    doc["elapsed_s"] = time.time() - t0
    json.dump(doc, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
