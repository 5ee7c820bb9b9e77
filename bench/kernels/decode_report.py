"""Decode rows of a bench.py JSON (T <= 64) as one compact table plus the issue-5 target counts.

Usage: python3 bench/kernels/decode_report.py bench.json
Columns: microseconds (share of the HBM read ceiling measured in the same run).
  stream / legacy / pdl: bf16 small-M schedules; wgmma: the contiguous kernel (T >= 8);
  shipped: what moe_grouped_gemm_bf16 runs (stream at T <= 16, wgmma above);
  i8 stream / i8 legacy: W8A16; i8/bf16 = shipped bf16 us / i8 stream us; old = the same ratio for
  the legacy pair (legacy bf16, or wgmma above T = 16, over legacy int8); torch: torch._grouped_mm.
"""
import json
import sys


def main(path):
    doc = json.load(open(path))
    ceiling = doc["hbm_read_ceiling_Bps"]
    print(f"{doc['device']} torch {doc['torch']} {doc['date_utc']} UTC; HBM read ceiling {ceiling / 1e12:.2f} TB/s")
    cols = [("stream", "dispatch_small_m"), ("legacy", "variant_small_m_legacy"), ("pdl", "variant_small_m_pdl"),
            ("wgmma", "dispatch_contiguous"), ("i8 stream", "dispatch_w8a16"), ("i8 legacy", "variant_w8a16_legacy"),
            ("torch", "torch_grouped_mm")]  # variant_w8a16_pdl stays in the JSON only
    short = {"olmoe": "olmoe", "qwen3-30b-a3b": "qwen3", "mixtral-8x7b": "mixtral", "deepseek-v3": "dsv3",
             "deepseek-moe-16b": "dsmoe16b"}
    print(f"{'shape':8s} {'proj':7s} {'T':>2s} {'route':4s} " + " ".join(f"{c:>10s}" for c, _ in cols)
          + f" {'shipped':>10s} {'i8/bf16':>7s} {'old':>5s}")
    hits = {"shipped85": [0, 0], "stream85": [0, 0], "legacy85": [0, 0], "i8_1.7x": [0, 0], "i8_1.7x_legacy": [0, 0]}
    for r in doc["rows"]:
        if r["tokens"] > 64:
            continue
        u, b = r["us"], r["bw_share"]

        def cell(m):
            return f"{u[m]:.1f}/{100 * b[m]:.0f}%".rjust(10) if m in u else f"{'-':>10s}"

        best = u.get("dispatch_small_m" if r["tokens"] <= 16 else "dispatch_contiguous")
        share = r["bytes_bf16"] / (best * 1e-6) / ceiling if best else 0.0
        i8 = best / u["dispatch_w8a16"] if best and "dispatch_w8a16" in u else None
        # the old shipped pair: legacy bf16 (or wgmma above T = 16) against legacy int8
        old_bf16 = u.get("variant_small_m_legacy" if r["tokens"] <= 16 else "dispatch_contiguous")
        i8_old = old_bf16 / u["variant_w8a16_legacy"] if old_bf16 and "variant_w8a16_legacy" in u else None
        for key, val, ok in (("shipped85", share if best else None, share >= 0.85),
                             ("stream85", b.get("dispatch_small_m"), (b.get("dispatch_small_m") or 0) >= 0.85),
                             ("legacy85", b.get("variant_small_m_legacy"), (b.get("variant_small_m_legacy") or 0) >= 0.85),
                             ("i8_1.7x", i8, (i8 or 0) >= 1.7), ("i8_1.7x_legacy", i8_old, (i8_old or 0) >= 1.7)):
            if val is not None:
                hits[key][0] += ok
                hits[key][1] += 1
        print(f"{short.get(r['model'], r['model'])[:8]:8s} {r['proj']:7s} {r['tokens']:2d} {r['routing'][:4]:4s} "
              + " ".join(cell(m) for _, m in cols)
              + (" " + f"{best:.1f}/{100 * share:.0f}%".rjust(10) if best else f" {'-':>10s}")
              + (f" {i8:6.2f}x" if i8 else f" {'-':>7s}") + (f" {i8_old:4.2f}x" if i8_old else f" {'-':>5s}"))
        if r.get("errors"):
            print("  errors:", r["errors"])
    print("targets (rows meeting / rows): " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in hits.items()))


if __name__ == "__main__":
    main(sys.argv[1])
