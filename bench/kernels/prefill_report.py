"""Prefill table from bench.py --prefill JSON: the wgmma kernel as it was before session 17 (old: staged epilogue,
static schedule, every row tile 128 rows) and as the library runs it now (new: staged, tiles from an atomic counter,
an expert's last tile of <= 64 rows run as a 64-row tile) side by side, the dynamic schedule alone (dyn/old), against torch._grouped_mm and dense cuBLAS of equal FLOPs, then one line of issue 5's
target counts at T >= 4096 for each.

Usage: python3 bench/kernels/prefill_report.py bench.json
Columns: microseconds (TFLOP/s); gmm/x = torch._grouped_mm us / x us (target >= 1.0); dense/x = dense
cuBLAS us / x us (target >= 0.90); new/old = old us / new us (> 1: new faster); silu old / new: gate_up with
SiLU-and-multiply fused, old / new; pp = new us / ping-pong kernel us; pp17 = session 17's ping-pong (static, 128-row
tiles) us / the ping-pong kernel us (its half tails and dynamic schedule since session 18); pairs = the ping-pong
kernel us / the same in 2-CTA clusters sharing each token tile us (session 19; > 1: pairs faster); pr/st = pairs
with the static schedule us / pairs (dynamic) us; stm = new us / new staging through stmatrix us, tma = new us / new
staging through stmatrix with TMA stores us (session 20; > 1: faster than the default), stma = tma for gate_up with
SiLU fused; pad = the row tiles the kernel runs (half tails as half) / rows / 128 (its MMA work over dense's, since
session 21); swt = new us / the cooperative kernel with swapped tails us (session 22; > 1: swapped tails faster),
swts = the same for gate_up with SiLU fused, soff = the cooperative kernel without swapped tails us / new us (> 1: new
faster; since session 22 the default runs them where the experts average < 512 rows), spad = pad with swapped tails (a 16- or 32-wide tail as 1/8 or 1/4 of a
tile), dns/swt = dense us / swapped tails us; dns/bst = dense
us / the fastest of new, ping-pong and pairs (what a rule picking among them could reach); noepi = new us / new-without-epilogue us (what any faster epilogue could give
at most). --min-tokens N: rows from N tokens (default 4096; the target counts are for
those rows).
"""
import json
import sys

OLD, NEW = "variant_contiguous_static_full", "variant_contiguous_staged"
DYN_FULL = "variant_contiguous_dynamic_full"  # the dynamic schedule alone, every row tile 128 rows
PP = "variant_contiguous_pingpong"  # the ping-pong kernel
PP17 = "variant_contiguous_pingpong_static_full"  # the ping-pong kernel as session 17 ran it
PAIRS = "variant_contiguous_pingpong_pairs"  # the ping-pong kernel in 2-CTA clusters (session 19)
PAIRS_S = "variant_contiguous_pingpong_pairs_static"  # the same with the static schedule
STM = "variant_contiguous_stmatrix"  # the library default staging through stmatrix (session 20)
TMA = "variant_contiguous_tma"  # the same with the epilogue's TMA stores (session 20)
SILU_TMA = "layer_gate_up_fused_silu_tma"
SWAP = "variant_contiguous_swap_tails"  # the cooperative kernel with swapped tails wherever they fit (session 22)
SWAP_OFF = "variant_contiguous_swap_off"  # the cooperative kernel without them (its default before session 22)
SILU_SWAP = "layer_gate_up_fused_silu_swap_tails"
NO_EPI = "variant_contiguous_no_epilogue"  # the cooperative kernel writing nothing: the most a faster epilogue gives
SILU_OLD, SILU_NEW = "layer_gate_up_fused_silu_static_full", "layer_gate_up_fused_silu_staged"
SHORT = {"olmoe": "olmoe", "qwen3-30b-a3b": "qwen3", "mixtral-8x7b": "mixtral", "deepseek-v3": "dsv3",
         "deepseek-moe-16b": "dsmoe16b"}


def main(path, min_tokens=4096):
    doc = json.load(open(path))
    rows = [r for r in doc["rows"] if r["tokens"] >= min_tokens]
    print(f"{doc['device']} torch {doc['torch']} {doc['date_utc']} UTC; dense bf16 8192^3: "
          f"{doc.get('dense_bf16_8192_tflops') or 0:.0f} TFLOP/s")
    print(f"{'shape':8s} {'proj':7s} {'T':>5s} {'route':4s} {'old':>12s} {'new':>12s} {'new/old':>7s} {'torch':>12s} "
          f"{'dense':>12s} {'pad':>7s} {'spad':>7s} {'swt':>7s} {'swts':>7s} {'soff':>7s} {'dns/swt':>7s} {'stm':>7s} {'tma':>7s} {'stma':>7s} {'pp':>7s} {'pp17':>7s} {'pairs':>7s} {'pr/st':>7s} {'dns/bst':>7s} {'noepi':>7s} {'dyn/old':>7s} {'gmm/old':>7s} {'gmm/new':>7s} {'dns/old':>7s} {'dns/new':>7s} {'silu old':>9s} "
          f"{'silu new':>9s}")
    hits = {k: [0, 0] for k in ("old_gmm_1.0x", "new_gmm_1.0x", "old_dense_0.9x", "new_dense_0.9x", "new_faster",
                                "silu_new_faster", "best_dense_0.9x", "stm_faster", "tma_faster", "tma_dense_0.9x",
                                "swt_faster", "swt_dense_0.9x", "swts_faster")}
    speedups = []
    tma_ratios = []
    swap_ratios = []

    def count(key, ok):
        hits[key][0] += bool(ok)
        hits[key][1] += 1

    for r in rows:
        u, f = r["us"], r.get("flops", 0)

        def cell(m):
            return f"{u[m]:.0f} ({f / (u[m] * 1e-6) / 1e12:.0f})".rjust(12) if m in u else f"{'-':>12s}"

        def ratio(a, b):  # a us / b us
            return u[a] / u[b] if a in u and b in u else None

        q = {"stm": ratio(NEW, STM), "tma": ratio(NEW, TMA), "stma": ratio(SILU_NEW, SILU_TMA), "dns/tma": ratio("cublas_dense", TMA),
             "new/old": ratio(OLD, NEW), "dyn/old": ratio(OLD, DYN_FULL), "noepi": ratio(NEW, NO_EPI), "pp": ratio(NEW, PP), "pp17": ratio(PP17, PP),
             "pairs": ratio(PP, PAIRS), "pr/st": ratio(PAIRS_S, PAIRS),
             "swt": ratio(NEW, SWAP), "swts": ratio(SILU_NEW, SILU_SWAP), "soff": ratio(SWAP_OFF, NEW), "dns/swt": ratio("cublas_dense", SWAP),
             "spad": r["row_tiles_swap"] / (r["rows"] / 128) if r.get("row_tiles_swap") and r.get("rows") else None,
             "dns/bst": (u["cublas_dense"] / min(u[m] for m in (NEW, PP, PAIRS, PAIRS_S, STM, TMA, SWAP) if m in u)
                         if "cublas_dense" in u and NEW in u else None),
             "gmm/old": ratio("torch_grouped_mm", OLD),
             "gmm/new": ratio("torch_grouped_mm", NEW), "dns/old": ratio("cublas_dense", OLD),
             "dns/new": ratio("cublas_dense", NEW),
             "pad": r["row_tiles"] / (r["rows"] / 128) if r.get("row_tiles") and r.get("rows") else None}
        for key, v, lim in (("old_gmm_1.0x", q["gmm/old"], 1.0), ("new_gmm_1.0x", q["gmm/new"], 1.0),
                            ("old_dense_0.9x", q["dns/old"], 0.9), ("new_dense_0.9x", q["dns/new"], 0.9),
                            ("new_faster", q["new/old"], 1.0), ("best_dense_0.9x", q["dns/bst"], 0.9),
                            ("stm_faster", q["stm"], 1.0), ("tma_faster", q["tma"], 1.0),
                            ("tma_dense_0.9x", q["dns/tma"], 0.9), ("swt_faster", q["swt"], 1.0),
                            ("swt_dense_0.9x", q["dns/swt"], 0.9), ("swts_faster", q["swts"], 1.0)):
            if v is not None:
                count(key, v >= lim if key not in ("new_faster", "stm_faster", "tma_faster", "swt_faster",
                                                   "swts_faster") else v > lim)
        if q["swt"] is not None:
            swap_ratios.append(q["swt"])
        if q["tma"] is not None:
            tma_ratios.append(q["tma"])
        if q["new/old"] is not None:
            speedups.append(q["new/old"])
        if SILU_OLD in u and SILU_NEW in u:
            count("silu_new_faster", u[SILU_NEW] < u[SILU_OLD])
        print(f"{SHORT.get(r['model'], r['model'])[:8]:8s} {r['proj']:7s} {r['tokens']:5d} {r['routing'][:4]:4s} "
              + f"{cell(OLD)} {cell(NEW)} " + (f"{q['new/old']:6.2f}x" if q["new/old"] else f"{'-':>7s}")
              + f" {cell('torch_grouped_mm')} {cell('cublas_dense')}"
              + "".join(f" {q[c]:6.2f}x" if q[c] else f" {'-':>7s}" for c in ("pad", "spad", "swt", "swts", "soff", "dns/swt", "stm", "tma", "stma", "pp", "pp17", "pairs", "pr/st", "dns/bst", "noepi", "dyn/old", "gmm/old", "gmm/new", "dns/old", "dns/new"))
              + "".join(f" {u[m]:9.0f}" if m in u else f" {'-':>9s}" for m in (SILU_OLD, SILU_NEW)))
        if r.get("errors"):
            print("  errors:", r["errors"])
    print(f"targets T>={min_tokens} (rows meeting / rows with both figures): "
          + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in hits.items())
          + f"; new/old {median_range(speedups)}"
          + (f"; tma {median_range(tma_ratios)}" if tma_ratios else "")
          + (f"; swapped tails {median_range(swap_ratios)}" if swap_ratios else ""))


def median_range(ratios):
    """'median 1.030x, range 0.98-1.21x' of a list of ratios ('-' for both when empty)."""
    xs = sorted(ratios)
    if not xs:
        return "median -, range -"
    return f"median {xs[len(xs) // 2]:.3f}x, range {xs[0]:.2f}-{xs[-1]:.2f}x"


if __name__ == "__main__":
    args = sys.argv[1:]
    min_t = 4096
    if "--min-tokens" in args:
        i = args.index("--min-tokens")
        min_t = int(args[i + 1])
        del args[i:i + 2]
    main(args[0], min_t)
