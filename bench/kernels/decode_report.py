"""Decode rows of a bench.py JSON (T <= 64) as one compact table plus the issue-5 target counts.

Usage: python3 bench/kernels/decode_report.py bench.json
Columns: microseconds (share of the HBM read ceiling measured in the same run; int8 columns count int8 bytes).
  legacy / pair / stream: bf16 small-M schedules (a column is left out when the run has no figure for it);
  pair nopf / i8 P nopf: pair without its L2 prefetch (T <= 8; row["pair_prefetch_share"] is the share of
  each weight row the default prefetches); i8 L d4 / i8 P d4: int8 legacy / pair at pipeline depth 4;
  wgmma: the contiguous kernel (T >= 8); shipped: what moe_grouped_gemm_bf16 runs (the library's
  small-M default at T <= 16, wgmma above); i8 legacy / i8 pair / i8 stream: W8A16;
  i8/bf16 = shipped bf16 us / i8 us for the legacy and pair int8 kernels; torch: torch._grouped_mm;
  best bf16 / best i8: the fastest small-M schedule of the row (what a per-shape default would take).
Works on both JSON layouts: runs before 18:00 UTC 2026-11-29 timed the stream schedule as dispatch_*
(small_m_default "stream") and legacy as variant_*_legacy; later runs time legacy as dispatch_*.
"""
import json
import sys


def keys(row):
    """Column name -> JSON method key for this row's layout."""
    if row.get("small_m_default") == "stream":
        return {"legacy": "variant_small_m_legacy", "pair": "variant_small_m_pair", "stream": "dispatch_small_m",
                "i8 legacy": "variant_w8a16_legacy", "i8 pair": "variant_w8a16_pair", "i8 stream": "dispatch_w8a16"}
    return {"legacy": "dispatch_small_m", "pair": "variant_small_m_pair", "stream": "variant_small_m_stream",
            "i8 legacy": "dispatch_w8a16", "i8 pair": "variant_w8a16_pair", "i8 stream": "variant_w8a16_stream"}


def main(path):
    doc = json.load(open(path))
    ceiling = doc["hbm_read_ceiling_Bps"]
    rows = [r for r in doc["rows"] if r["tokens"] <= 64]
    print(f"{doc['device']} torch {doc['torch']} {doc['date_utc']} UTC; HBM read ceiling {ceiling / 1e12:.2f} TB/s")
    names = ["legacy", "pair", "pair nopf", "stream", "wgmma", "i8 legacy", "i8 pair", "i8 P nopf", "i8 stream",
             "i8 L d4", "i8 P d4", "torch"]
    fixed = {"wgmma": "dispatch_contiguous", "torch": "torch_grouped_mm", "i8 L d4": "variant_w8a16_legacy_d4",
             "i8 P d4": "variant_w8a16_pair_d4", "pair nopf": "variant_small_m_pair_nopf",
             "i8 P nopf": "variant_w8a16_pair_nopf"}
    present = [c for c in names if any({**keys(r), **fixed}[c] in r["us"] for r in rows)]
    short = {"olmoe": "olmoe", "qwen3-30b-a3b": "qwen3", "mixtral-8x7b": "mixtral", "deepseek-v3": "dsv3",
             "deepseek-moe-16b": "dsmoe16b"}
    print(f"{'shape':8s} {'proj':7s} {'T':>2s} {'route':4s} " + " ".join(f"{c:>10s}" for c in present)
          + f" {'shipped':>10s} {'i8L/bf16':>8s} {'i8P/bf16':>8s} {'best bf16':>9s} {'best i8':>9s}")
    hits = {k: [0, 0] for k in ("shipped85", "legacy85", "pair85", "stream85", "pair_faster_bf16", "i8_legacy85",
                                "i8_pair85", "i8_pair_faster", "pair_prefetch_faster_bf16", "i8_pair_prefetch_faster",
                                "i8_legacy_1.7x", "i8_pair_1.7x", "best_bf16_85", "best_i8_1.7x")}

    def count(key, val, ok):
        if val is not None:
            hits[key][0] += bool(ok)
            hits[key][1] += 1

    for r in rows:
        u, b, k = r["us"], r["bw_share"], {**keys(r), **fixed}

        def cell(c):
            m = k[c]
            return f"{u[m]:.1f}/{100 * b[m]:.0f}%".rjust(10) if m in u else f"{'-':>10s}"

        best = u.get(k["legacy"] if r["tokens"] <= 16 and r.get("small_m_default") != "stream" else
                     "dispatch_small_m" if r["tokens"] <= 16 else "dispatch_contiguous")
        share = r["bytes_bf16"] / (best * 1e-6) / ceiling if best else None
        ratio = {c: best / u[k[c]] if best and k[c] in u else None for c in ("i8 legacy", "i8 pair")}
        bf_cols = [c for c in ("legacy", "pair", "pair nopf", "stream") if k[c] in u]
        i8_cols = [c for c in ("i8 legacy", "i8 pair", "i8 P nopf", "i8 stream", "i8 L d4", "i8 P d4") if k[c] in u]
        best_bf = min(bf_cols, key=lambda c: u[k[c]]) if bf_cols else None
        best_i8 = min(i8_cols, key=lambda c: u[k[c]]) if i8_cols else None
        if best_bf:
            count("best_bf16_85", 1, b[k[best_bf]] >= 0.85)
        if best_i8 and best:
            count("best_i8_1.7x", 1, best / u[k[best_i8]] >= 1.7)
        count("shipped85", share, (share or 0) >= 0.85)
        for c, key in (("legacy", "legacy85"), ("pair", "pair85"), ("stream", "stream85"),
                       ("i8 legacy", "i8_legacy85"), ("i8 pair", "i8_pair85")):
            count(key, b.get(k[c]), (b.get(k[c]) or 0) >= 0.85)
        if k["pair"] in u and k["legacy"] in u:
            count("pair_faster_bf16", 1, u[k["pair"]] < u[k["legacy"]])
        if k["pair nopf"] in u and k["pair"] in u:
            count("pair_prefetch_faster_bf16", 1, u[k["pair"]] < u[k["pair nopf"]])
        if k["i8 P nopf"] in u and k["i8 pair"] in u:
            count("i8_pair_prefetch_faster", 1, u[k["i8 pair"]] < u[k["i8 P nopf"]])
        if k["i8 pair"] in u and k["i8 legacy"] in u:
            count("i8_pair_faster", 1, u[k["i8 pair"]] < u[k["i8 legacy"]])
        count("i8_legacy_1.7x", ratio["i8 legacy"], (ratio["i8 legacy"] or 0) >= 1.7)
        count("i8_pair_1.7x", ratio["i8 pair"], (ratio["i8 pair"] or 0) >= 1.7)
        print(f"{short.get(r['model'], r['model'])[:8]:8s} {r['proj']:7s} {r['tokens']:2d} {r['routing'][:4]:4s} "
              + " ".join(cell(c) for c in present)
              + (" " + f"{best:.1f}/{100 * share:.0f}%".rjust(10) if best else f" {'-':>10s}")
              + "".join(f" {ratio[c]:7.2f}x" if ratio[c] else f" {'-':>8s}" for c in ("i8 legacy", "i8 pair"))
              + f" {best_bf or '-':>9s} {best_i8 or '-':>9s}")
        if r.get("errors"):
            print("  errors:", r["errors"])
    print("targets (rows meeting / rows with both figures): "
          + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in hits.items() if v[1]))


if __name__ == "__main__":
    main(sys.argv[1])
