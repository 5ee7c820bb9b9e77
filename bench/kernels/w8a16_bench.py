"""W8A16 tensor-core grouped GEMM (sm90_w8a16_grouped_gemm_contiguous) against the shipped kernels, on the H200.

For each shape, projection, token count and routing, in one run: the new int8 kernel with the layer's
token-tile hint (`w8a16_wgmma`; at token tiles <= 64 also forced to one or two CTAs per SM, `w8a16_wgmma_1cta` and
`_2cta`, at T <= 64 the 8-token tile, `w8a16_wgmma_t8`, and at T >= 256 each wide token tile forced,
`w8a16_wgmma_t64`, `_t128`, `_t192`), the int8 small-M kernel (`w8a16_small_m`, T <= 64, legacy schedule as the
library's auto picks), the shipped bf16 entry (`bf16`: moe_grouped_gemm_bf16; since session 8 the swap-AB kernel at
most decode sizes, see grouped_gemm.h), the entry's paths before session 8 (small-M at T <= 16, the wgmma kernel above;
`bf16_prev`, DK_BF16_SWAPAB=0), the bf16 swap-AB tensor-core kernel (`bf16_swapab` with the layer's hint, also
forced to two CTAs per SM, `bf16_swapab_2cta`; `--bf16-tiles` forces tiles as `bf16_swapab_t<tile>`; these at
T <= 256 unless --bf16-max-tokens says otherwise) and torch._grouped_mm (bf16), with the HBM read ceiling measured
in the same run. Where the launch rule splits K over thread-block clusters (session 9: rows with fewer work items
than SMs, `split_int8` / `split_bf16` in the row), the same launch unsplit (`w8a16_wgmma_nosplit`,
`bf16_swapab_nosplit`, DK_SWAPAB_SPLIT_K=1).
Timing as bench.py (CUDA-graph replays, weights rotated past L2, median), but since session 8 every method of a row
is captured first and the replays run in interleaved rounds (bench.GraphSet), so no method gains from running first
after a pause. Bytes: int8 methods count one
byte per weight plus the scales, bf16 methods two; activations read and written for both.

Usage: python3 bench/kernels/w8a16_bench.py --out results.json [--tokens 1,8,64,...] [--models ...]
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))
import bench  # noqa: E402
import dk  # noqa: E402
from moe_shapes import SHAPES, group_rows, projections, route  # noqa: E402

TOKENS = "1,8,16,17,32,64,256,1024,4096,16384"
METHODS = set()  # --methods: empty = every method
TILES = ()  # --tiles: token tiles forced as extra methods (w8a16_wgmma_t<tile>) at every T
BF16_TILES = ()  # --bf16-tiles: the same for the bf16 swap-AB kernel (bf16_swapab_t<tile>)
BF16_MAX_TOKENS = 256  # --bf16-max-tokens: the bf16 swap-AB methods run at T <= this
SPLITS = ()  # --splits: split-K cluster sizes forced as extra methods (w8a16_wgmma_s<n>, bf16_swapab_s<n>)


def row_for(model, proj, N, K, E, k, T, kind, Wc, Wqc, Ws, gen, ceiling):
    _, counts, offsets = group_rows(route(T, E, k, kind, gen), E)
    M = T * k
    active = int((counts > 0).sum().item())
    X = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    Y = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    act = M * K * 2 + M * N * 2
    b16, b8 = active * N * K * 2 + act, active * N * (K + 4) + act
    flops = 2.0 * M * N * K
    hint = 2 * math.ceil(M / E) + 8
    r = {"model": model, "proj": proj, "N": N, "K": K, "E": E, "top_k": k, "tokens": T, "routing": kind,
         "active_experts": active, "max_rows_per_expert": int(counts.max().item()), "hint": hint,
         "token_tile": dk.w8a16_wgmma_token_tile(hint), "bytes_bf16": b16, "bytes_int8": b8, "flops": flops, "us": {}}
    est16, est8 = max(b16 / 3.5e12, flops / 5e14), max(b8 / 3.5e12, flops / 3e14)
    graphs = bench.GraphSet()  # every method captured first, then timed in interleaved rounds

    def run(name, fns, est):
        if METHODS and name not in METHODS:
            return
        try:
            graphs.add(name, fns, est)
        except Exception as ex:  # recorded, not fatal
            r.setdefault("errors", {})[name] = repr(ex)[:300]

    run("w8a16_wgmma", [lambda q=q: dk.grouped_gemm_w8a16_contiguous(X, q, Ws, Y, offsets, hint) for q in Wqc], est8)

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    r["split_int8"] = dk.swapab_split_k(r["token_tile"], M, E, N, K // 128, sms)
    r["split_bf16"] = dk.swapab_split_k(dk.bf16_swapab_token_tile(hint), M, E, N, K // 64, sms)

    def variant(name, h, ctas=None, tile=None, split=None):  # the same kernel under the launcher's A/B switches
        with dk.launch_switches(DK_W8A16_CTAS_PER_SM=ctas, DK_W8A16_TOKEN_TILE=tile, DK_SWAPAB_SPLIT_K=split):
            run(name, [lambda q=q: dk.grouped_gemm_w8a16_contiguous(X, q, Ws, Y, offsets, h) for q in Wqc], est8)

    if r["split_int8"] > 1:  # the launch rule splits K over clusters: the same launch without it
        variant("w8a16_wgmma_nosplit", hint, split=1)
    for sp in SPLITS:  # --splits: forced cluster sizes
        variant(f"w8a16_wgmma_s{sp}", hint, split=sp)
    if r["token_tile"] <= 64:
        variant("w8a16_wgmma_1cta", hint, ctas=1)
        variant("w8a16_wgmma_2cta", hint, ctas=2)  # the launcher picks one CTA when there is ~1 work item per SM
    # forced token tiles: every wide one at T >= 256 (prefill and mixed steps), and --tiles at any T
    for t in sorted(set((64, 128, 192) if T >= 256 else ()) | set(TILES)):
        variant(f"w8a16_wgmma_t{t}", hint, tile=t)
    if T <= 64 and r["token_tile"] > 8:  # the 8-token tile (wgmma n8), by an explicit hint
        variant("w8a16_wgmma_t8", 8)
    if T <= 64:
        dk.set_small_m_impl("auto")
        h = min(T, hint)
        run("w8a16_small_m", [lambda q=q: dk.grouped_gemm_masked(X, q, Y, offsets=offsets, max_rows=h,
                                                                  max_active=min(E, M), scales=Ws) for q in Wqc], est8)
    run("bf16", [lambda W=W: dk.moe_grouped_gemm(X, W, Y, offsets, T) for W in Wc], est16)
    if T <= BF16_MAX_TOKENS:
        with dk.launch_switches(DK_BF16_SWAPAB="0"):  # the entry's paths before the swap-AB kernel
            run("bf16_prev", [lambda W=W: dk.moe_grouped_gemm(X, W, Y, offsets, T) for W in Wc], est16)

        def swapab(name, h, ctas=None, tile=None, split=None):  # the bf16 swap-AB kernel under its A/B switches
            with dk.launch_switches(DK_BF16_SWAPAB_CTAS_PER_SM=ctas, DK_BF16_SWAPAB_TOKEN_TILE=tile,
                                    DK_SWAPAB_SPLIT_K=split):
                run(name, [lambda W=W: dk.grouped_gemm_bf16_swapab(X, W, Y, offsets, h) for W in Wc], est16)

        swapab("bf16_swapab", hint)
        if r["split_bf16"] > 1:
            swapab("bf16_swapab_nosplit", hint, split=1)
        for sp in SPLITS:
            swapab(f"bf16_swapab_s{sp}", hint, split=sp)
        swapab("bf16_swapab_2cta", hint, ctas=2)
        for t in BF16_TILES:
            swapab(f"bf16_swapab_t{t}", hint, tile=t)
    offs = offsets[1:].contiguous()
    run("torch_grouped_mm", [lambda W=W: torch._grouped_mm(X, W.transpose(1, 2), offs=offs) for W in Wc], est16)
    r["us"] = graphs.time()
    u = r["us"]
    r["bw_share"] = {m: (b8 if m.startswith("w8a16") else b16) / (v * 1e-6) / ceiling for m, v in u.items()}
    r["tflops"] = {m: flops / (v * 1e-6) / 1e12 for m, v in u.items()}
    if "w8a16_wgmma" in u:
        r["speedup_vs_bf16"] = u["bf16"] / u["w8a16_wgmma"] if "bf16" in u else None
        r["t8_speedup"] = u["w8a16_wgmma"] / u["w8a16_wgmma_t8"] if "w8a16_wgmma_t8" in u else None
        r["speedup_vs_small_m"] = u["w8a16_small_m"] / u["w8a16_wgmma"] if "w8a16_small_m" in u else None
        r["speedup_vs_1cta"] = u["w8a16_wgmma_1cta"] / u["w8a16_wgmma"] if "w8a16_wgmma_1cta" in u else None
        r["speedup_vs_2cta"] = u["w8a16_wgmma_2cta"] / u["w8a16_wgmma"] if "w8a16_wgmma_2cta" in u else None
        for t in (8, 16, 32, 64, 128, 192):
            if f"w8a16_wgmma_t{t}" in u:
                r[f"t{t}_speedup"] = u["w8a16_wgmma"] / u[f"w8a16_wgmma_t{t}"]
        r["speedup_vs_torch"] = u["torch_grouped_mm"] / u["w8a16_wgmma"] if "torch_grouped_mm" in u else None
    if "bf16_prev" in u and "bf16" in u:
        r["bf16_vs_prev"] = u["bf16_prev"] / u["bf16"]
    for m in ("w8a16_wgmma", "bf16_swapab"):
        if m in u and f"{m}_nosplit" in u:
            r[f"{m}_split_speedup"] = u[f"{m}_nosplit"] / u[m]
    if "bf16_swapab" in u and "bf16" in u:
        r["swapab_vs_bf16"] = u["bf16"] / u["bf16_swapab"]
        r["bf16_swapab_tile"] = dk.bf16_swapab_token_tile(hint)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--lib")
    ap.add_argument("--models", default=",".join(SHAPES))
    ap.add_argument("--tokens", default=TOKENS)
    ap.add_argument("--routings", default="uniform,zipf")
    ap.add_argument("--budget-s", type=float, default=240)
    ap.add_argument("--methods", default="", help="comma-separated subset of the methods (default: all)")
    ap.add_argument("--tiles", default="", help="token tiles to force at every T as w8a16_wgmma_t<tile> (8,16,32,64,128,192)")
    ap.add_argument("--bf16-tiles", default="", help="token tiles to force as bf16_swapab_t<tile> (8,16,32,64)")
    ap.add_argument("--bf16-max-tokens", type=int, default=256)
    ap.add_argument("--splits", default="", help="split-K cluster sizes to force as extra methods (1,2,4)")
    args = ap.parse_args()
    global METHODS, TILES, BF16_TILES, BF16_MAX_TOKENS, SPLITS
    METHODS = set(m for m in args.methods.split(",") if m)
    TILES = tuple(int(t) for t in args.tiles.split(",") if t)
    if any(t not in (8, 16, 32, 64, 128, 192) for t in TILES):
        ap.error(f"--tiles takes 8, 16, 32, 64, 128, 192; got {args.tiles}")
    BF16_TILES = tuple(int(t) for t in args.bf16_tiles.split(",") if t)
    if any(t not in (8, 16, 32, 64) for t in BF16_TILES):
        ap.error(f"--bf16-tiles takes 8, 16, 32, 64; got {args.bf16_tiles}")
    BF16_MAX_TOKENS = args.bf16_max_tokens
    SPLITS = tuple(int(t) for t in args.splits.split(",") if t)
    if any(t not in (1, 2, 4) for t in SPLITS):
        ap.error(f"--splits takes 1, 2, 4; got {args.splits}")
    bench.TIME_S = 0.04
    t0 = time.time()
    dk.load(args.lib)
    dk.set_small_m_impl("auto")
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    ceiling = bench.hbm_read_ceiling()
    doc = {"device": torch.cuda.get_device_name(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
           "hbm_read_ceiling_Bps": ceiling, "rows": []}
    print(f"ceiling {ceiling / 1e12:.2f} TB/s", flush=True)
    for model in args.models.split(","):
        H, I, E, k = SHAPES[model]
        for proj, N, K in projections(H, I):
            if time.time() - t0 > args.budget_s:
                doc["truncated"] = True
                break
            torch.cuda.empty_cache()
            W = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
            q, s = dk.quantize_int8_rows(W.view(E * N, K))
            Wq, Ws = q.view(E, N, K), s.view(E, N)
            min_touched = min(E, k) * N * K
            n16 = max(1, min(8, math.ceil(3 * bench.L2_BYTES / (2 * min_touched)), int(30e9 // (E * N * K * 2))))
            n8 = max(1, min(8, math.ceil(3 * bench.L2_BYTES / min_touched), int(30e9 // (E * N * K))))
            Wc = [W] + [W.clone() for _ in range(n16 - 1)]
            Wqc = [Wq] + [Wq.clone() for _ in range(n8 - 1)]
            for T in (int(t) for t in args.tokens.split(",")):
                for kind in args.routings.split(","):
                    if time.time() - t0 > args.budget_s:
                        doc["truncated"] = True
                        break
                    r = row_for(model, proj, N, K, E, k, T, kind, Wc, Wqc, Ws, gen, ceiling)
                    doc["rows"].append(r)
                    json.dump(doc, open(args.out, "w"), indent=1)
                    u, bw = r["us"], r["bw_share"]
                    print(f"{model:16s} {proj:7s} T={T:5d} {kind:7s} tile={r['token_tile']:3d} "
                          + " ".join(f"{m}={u[m]:.1f}us({100 * bw[m]:.0f}%)" for m in u)
                          + f" x_bf16={r.get('speedup_vs_bf16') or 0:.2f} bf16/prev={r.get('bf16_vs_prev') or 0:.2f} x_t8={r.get('t8_speedup') or 0:.2f} x_1cta={r.get('speedup_vs_1cta') or 0:.2f} x_smallm={r.get('speedup_vs_small_m') or 0:.2f}",
                          flush=True)
            del Wc, Wqc, W, q, s, Wq, Ws
    doc["elapsed_s"] = time.time() - t0
    json.dump(doc, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
