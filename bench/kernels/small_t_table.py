"""Markdown table of a w8a16_bench.py result at decode sizes (docs/kernels.md, "Tables"): per shape, projection,
token count and routing, microseconds and share of the run's HBM read ceiling for the shipped bf16 entry
(`bf16`), the entry's paths before session 8 (`bf16_prev`, when the run has them), int8 as native-cuda launches it
(the small-M kernel at one token, the tensor-core kernel above), int8's speedup over the bf16 entry, and
torch._grouped_mm. Then one line per T: rows at >= 85% of HBM and rows with int8 >= 1.7x bf16.

Usage: python3 bench/kernels/small_t_table.py results.json[.gz] [--tokens 1,8,64]
"""
import argparse
import gzip
import json


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def int8_method(r):
    return "w8a16_small_m" if r["tokens"] == 1 and "w8a16_small_m" in r["us"] else "w8a16_wgmma"


def cell(r, m):
    if m not in r["us"]:
        return "-"
    return f"{r['us'][m]:.1f} ({100 * r['bw_share'][m]:.0f}%)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--tokens", default="1,8,64")
    args = ap.parse_args()
    doc = load(args.path)
    tokens = [int(t) for t in args.tokens.split(",") if t]
    rows = [r for r in doc["rows"] if r["tokens"] in tokens and "bf16" in r["us"]]
    if not rows:
        raise SystemExit(f"no rows with a bf16 time at T = {args.tokens} in {args.path}")
    prev = any("bf16_prev" in r["us"] for r in rows)
    print(f"{doc['device']}, {doc['date_utc']} UTC; HBM read ceiling measured in the run: "
          f"{doc['hbm_read_ceiling_Bps'] / 1e12:.2f} TB/s. Microseconds (share of that ceiling).\n")
    head = ["shape", "proj", "T", "routing", "bf16 entry"] + (["bf16 before session 8"] if prev else []) + [
        "int8", "int8/bf16", "torch._grouped_mm"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    rows.sort(key=lambda r: (list(dict.fromkeys(x["model"] for x in doc["rows"])).index(r["model"]), r["proj"] != "gate_up",
                             r["tokens"], r["routing"]))
    for r in rows:
        i8 = int8_method(r)
        ratio = f"{r['us']['bf16'] / r['us'][i8]:.2f}x" if i8 in r["us"] else "-"
        cells = [r["model"], r["proj"], str(r["tokens"]), r["routing"], cell(r, "bf16")] + (
            [cell(r, "bf16_prev")] if prev else []) + [cell(r, i8), ratio, cell(r, "torch_grouped_mm")]
        print("| " + " | ".join(cells) + " |")
    print()
    for T in tokens:
        at = [r for r in rows if r["tokens"] == T]
        if not at:
            continue
        hbm = sum(r["bw_share"]["bf16"] >= 0.85 for r in at)
        fast = sum(int8_method(r) in r["us"] and r["us"]["bf16"] / r["us"][int8_method(r)] >= 1.7 for r in at)
        line = f"T = {T}: bf16 entry >= 85% of HBM on {hbm} of {len(at)} rows"
        if prev:
            line += f" (before session 8: {sum(r['bw_share'].get('bf16_prev', 0) >= 0.85 for r in at)})"
        print(line + f"; int8 >= 1.7x the bf16 entry on {fast} of {len(at)}")


if __name__ == "__main__":
    main()
