"""Turns a bench.py JSON into the markdown tables and the SVG chart of docs/kernels.md.

Usage: python3 bench/kernels/report.py bench/kernels/results/h200-<date>.json docs/kernels-chart.svg > tables.md
"""
import gzip
import json
import sys

METHODS = ["dispatch", "dispatch_w8a16", "torch_grouped_mm", "cublas_loop", "cublas_dense"]
SHORT = {"dispatch": "ours bf16", "dispatch_w8a16": "ours int8", "torch_grouped_mm": "torch._grouped_mm",
         "cublas_loop": "cuBLAS loop", "cublas_dense": "dense cuBLAS"}


SMS, SMALL_M_CTAS_PER_SM = 132, 7  # H200; small-M bf16 tile (71 registers, launch bound 7)


def ours(r):
    """The shipped path for this row. Runs from session 9 on time it directly (`dispatch_entry`: the bf16 MoE entry,
    moe_grouped_gemm_bf16); earlier runs are read off the kernels timed in the same run: T <= 16 small-M (row
    blocks per CTA = waves of resident CTAs when 1-3 waves, else 1), otherwise the cooperative wgmma kernel."""
    u = r["us"]
    if "dispatch_entry" in u:
        return "entry", u["dispatch_entry"]
    if r["tokens"] > 16:
        return "contiguous", u.get("dispatch_contiguous")
    if r.get("small_m_default") == "stream":  # runs from 2026-11-29 17:30 UTC on: the stream schedule
        return "small-M stream", u.get("dispatch_small_m")
    if r.get("small_m_default") == "legacy":  # runs from 2026-11-29 18:00 UTC on: legacy, the library default
        return "small-M legacy", u.get("dispatch_small_m")
    ctas = (r["N"] // 16) * min(r["E"], r["rows"])
    waves = -(-ctas // (SMS * SMALL_M_CTAS_PER_SM))
    if waves <= 3:
        return f"small-M x{waves}", u.get("dispatch_small_m")
    return "small-M x1", u.get("variant_small_m_rb1")


def with_ours(doc, ceiling):
    """Adds `dispatch` (ours bf16, above) and, in runs from session 9 on, makes `dispatch_w8a16` the W8A16
    tensor-core GEMM (earlier runs: the int8 small-M kernel)."""
    for r in doc["rows"]:
        if "dispatch_w8a16_wgmma" in r["us"]:
            for d in ("us", "tflops", "bw_share"):
                r[d]["dispatch_w8a16"] = r[d]["dispatch_w8a16_wgmma"]
        kern, us = ours(r)
        if us is None:
            continue
        r["us"]["dispatch"] = us
        r["dispatch_path"] = kern
        r["tflops"]["dispatch"] = r["flops"] / (us * 1e-6) / 1e12
        r["bw_share"]["dispatch"] = r["bytes_bf16"] / (us * 1e-6) / ceiling
    return doc


def tables(doc):
    out = [f"Device: {doc['device']}, torch {doc['torch']}, {doc['date_utc']} UTC. "
           f"HBM read ceiling measured in the run: {doc['hbm_read_ceiling_Bps'] / 1e12:.2f} TB/s; "
           f"dense bf16 8192^3: {doc['dense_bf16_8192_tflops'] or 0:.0f} TFLOP/s.", ""]
    rows = doc["rows"]
    read = any("read_same_bytes" in r["us"] for r in rows)
    out += ["### Small token counts: microseconds (share of the HBM read ceiling)", "",
            "| shape | proj | T | routing | ours bf16 | ours int8 | int8/bf16 | torch._grouped_mm | cuBLAS loop |"
            + (" one read of the same bytes |" if read else ""),
            "|---|---|---|---|---|---|---|---|---|" + ("---|" if read else "")]
    for r in rows:
        if r["tokens"] > 64:
            continue
        u, b = r["us"], r["bw_share"]
        cell = lambda m: f"{u[m]:.1f} ({100 * b[m]:.0f}%)" if m in u else "-"
        ratio = f"{u['dispatch'] / u['dispatch_w8a16']:.2f}x" if "dispatch_w8a16" in u and "dispatch" in u else "-"
        out.append(f"| {r['model']} | {r['proj']} | {r['tokens']} | {r['routing']} | {cell('dispatch')} | "
                   f"{cell('dispatch_w8a16')} | {ratio} | {cell('torch_grouped_mm')} | {cell('cublas_loop')} |"
                   + (f" {cell('read_same_bytes')} |" if read else ""))
    out += ["", "### Large token counts: microseconds (TFLOP/s)", "",
            "| shape | proj | T | routing | ours | torch._grouped_mm | grouped_mm / ours | dense cuBLAS | dense / ours | cuBLAS loop |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["tokens"] < 256:
            continue
        u, f = r["us"], r["tflops"]
        cell = lambda m: f"{u[m]:.0f} ({f[m]:.0f})" if m in u else "-"
        vs = lambda m: f"{u[m] / u['dispatch']:.2f}x" if m in u and "dispatch" in u else "-"
        out.append(f"| {r['model']} | {r['proj']} | {r['tokens']} | {r['routing']} | {cell('dispatch')} | "
                   f"{cell('torch_grouped_mm')} | {vs('torch_grouped_mm')} | {cell('cublas_dense')} | {vs('cublas_dense')} | "
                   f"{cell('cublas_loop')} |")
    return "\n".join(out)


def svg(doc, path):
    """Two panels: bandwidth share at T=1/8/64 (uniform), TFLOP/s at T=4096/16384 (uniform)."""
    rows = [r for r in doc["rows"] if r["routing"] == "uniform"]
    small = [r for r in rows if r["tokens"] in (1, 8, 64)]
    large = [r for r in rows if r["tokens"] in (4096, 16384)]
    colors = {"dispatch": "#1f77b4", "dispatch_w8a16": "#2ca02c", "torch_grouped_mm": "#ff7f0e",
              "cublas_loop": "#9467bd", "cublas_dense": "#7f7f7f"}
    W, bar, gap = 1200, 5, 6
    parts = []

    def panel(y0, title, data, methods, value, vmax, unit):
        h = 260
        parts.append(f'<text x="10" y="{y0 + 16}" font-size="14" font-weight="bold">{title}</text>')
        x = 60
        base = y0 + 30 + h
        for frac in (0, 0.25, 0.5, 0.75, 1.0):
            yy = base - frac * h
            parts.append(f'<line x1="55" x2="{W - 10}" y1="{yy}" y2="{yy}" stroke="#ddd"/>')
            parts.append(f'<text x="50" y="{yy + 4}" font-size="10" text-anchor="end">{frac * vmax:.0f}{unit}</text>')
        for r in data:
            present = [m for m in methods if m in r["us"]]
            for i, m in enumerate(present):
                v = value(r, m)
                hh = max(0.0, min(v / vmax, 1.0)) * h
                parts.append(f'<rect x="{x + i * bar}" y="{base - hh:.1f}" width="{bar - 1}" height="{hh:.1f}" '
                             f'fill="{colors[m]}"><title>{r["model"]} {r["proj"]} T={r["tokens"]} {SHORT[m]}: '
                             f'{v:.1f}{unit}</title></rect>')
            label = f'{r["model"][:10]} {r["proj"][:4]} {r["tokens"]}'
            cx = x + len(present) * bar / 2
            parts.append(f'<text x="{cx}" y="{base + 8}" font-size="8" transform="rotate(60 {cx} {base + 8})">{label}</text>')
            x += len(present) * bar + gap
        return x

    x1 = panel(0, "Share of measured HBM read bandwidth, T = 1 / 8 / 64 (uniform routing)", small,
               ["dispatch", "dispatch_w8a16", "torch_grouped_mm", "cublas_loop"],
               lambda r, m: 100 * r["bw_share"][m], 100, "%")
    x2 = panel(400, "TFLOP/s, T = 4096 / 16384 (uniform routing)", large,
               ["dispatch", "torch_grouped_mm", "cublas_dense", "cublas_loop"],
               lambda r, m: r["tflops"][m], 800, "")
    width = max(W, x1, x2) + 20
    legend = "".join(f'<rect x="{60 + i * 150}" y="805" width="10" height="10" fill="{c}"/>'
                     f'<text x="{75 + i * 150}" y="814" font-size="11">{SHORT[m]}</text>'
                     for i, (m, c) in enumerate(colors.items()))
    with open(path, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="830" font-family="sans-serif">'
                f'<rect width="100%" height="100%" fill="white"/>{"".join(parts)}{legend}</svg>\n')


if __name__ == "__main__":
    path = sys.argv[1]
    doc = json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))
    doc = with_ours(doc, doc["hbm_read_ceiling_Bps"])
    print(tables(doc))
    if len(sys.argv) > 2:
        svg(doc, sys.argv[2])
