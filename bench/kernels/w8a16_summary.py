"""Per-T summary of a w8a16_bench.py result: for each method, the median (min-max) share of the HBM
ceiling and the median speedup of `w8a16_wgmma` over it, over every row at that T.

Usage: python3 bench/kernels/w8a16_summary.py results.json [--model qwen3-30b-a3b]
"""
import argparse
import json
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--model", default="")
    args = ap.parse_args()
    doc = json.load(open(args.path))
    rows = [r for r in doc["rows"] if not args.model or r["model"] == args.model]
    print(f"{doc['device']} {doc['date_utc']} ceiling {doc['hbm_read_ceiling_Bps'] / 1e12:.2f} TB/s, {len(rows)} rows")
    for T in sorted({r["tokens"] for r in rows}):
        at = [r for r in rows if r["tokens"] == T]
        methods = sorted({m for r in at for m in r["us"]})
        parts = []
        for m in methods:
            bw = [r["bw_share"][m] for r in at if m in r["us"]]
            ratio = [r["us"][m] / r["us"]["w8a16_wgmma"] for r in at if m in r["us"] and "w8a16_wgmma" in r["us"]]
            s = f"{m.replace('w8a16_', '')} {100 * statistics.median(bw):.0f}% ({100 * min(bw):.0f}-{100 * max(bw):.0f})"
            if m != "w8a16_wgmma" and ratio:
                s += f" x{statistics.median(ratio):.2f}"
            parts.append(s)
        print(f"T={T:5d} n={len(at):2d}: " + "; ".join(parts))


if __name__ == "__main__":
    main()
