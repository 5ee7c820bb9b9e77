"""SVG chart of a w8a16_bench.py result (docs/kernels.md, "Session 7"): against the token count T (log2 axis),
left the share of the HBM read ceiling at T <= 256 (the weight-bound sizes) with issue 5's 85% line, right
the int8 kernel's speedup over the bf16 entry and over torch._grouped_mm at every T with the 1.7x line.
Each point is the median over the run's rows at that T (models x projections x routings), the whisker
their min-max. "int8" is what native-cuda launches: the small-M kernel at one token, the tensor-core
kernel above.

Usage: python3 bench/kernels/w8a16_chart.py results.json[.gz] docs/kernels-w8a16-chart.svg ["title"]
"""
import gzip
import json
import math
import statistics
import sys

W, H = 440, 300
PAD_L, PAD_R, PAD_T, PAD_B = 52, 14, 30, 40
COLORS = {"int8": "#d62728", "bf16": "#1f77b4", "torch": "#7f7f7f"}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def int8_method(r):
    return "w8a16_small_m" if r["tokens"] == 1 and "w8a16_small_m" in r["us"] else "w8a16_wgmma"


def series(doc):
    """T -> {name: [values]} for both panels."""
    ceiling = doc["hbm_read_ceiling_Bps"]
    share, speed = {}, {}
    for r in doc["rows"]:
        u, T, m8 = r["us"], r["tokens"], int8_method(r)
        if m8 not in u:
            continue
        s = share.setdefault(T, {"int8": [], "bf16": [], "torch": []})
        s["int8"].append(r["bytes_int8"] / (u[m8] * 1e-6) / ceiling)
        for name, key in (("bf16", "bf16"), ("torch", "torch_grouped_mm")):
            if key in u:
                s[name].append(r["bytes_bf16"] / (u[key] * 1e-6) / ceiling)
                speed.setdefault(T, {"bf16": [], "torch": []})[name].append(u[key] / u[m8])
    return share, speed


def panel(ox, title, data, names, ymax, step, ylabel_fmt, targets, ts):
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    lo, hi = math.log2(ts[0]), math.log2(ts[-1])
    x_at = lambda t: ox + PAD_L + (pw / 2 if hi == lo else (math.log2(t) - lo) / (hi - lo) * pw)
    y_at = lambda v: PAD_T + ph - min(v, ymax) / ymax * ph
    out = [f'<text x="{ox + W / 2}" y="{PAD_T - 12}" text-anchor="middle" font-size="12">{title}</text>',
           f'<rect x="{ox + PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>']
    for i in range(round(ymax / step) + 1):
        v = i * step
        out.append(f'<line x1="{ox + PAD_L}" y1="{y_at(v):.1f}" x2="{ox + PAD_L + pw}" y2="{y_at(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{ox + PAD_L - 4}" y="{y_at(v) + 3:.1f}" text-anchor="end">{ylabel_fmt(v)}</text>')
    for t in ts:
        out.append(f'<text x="{x_at(t):.1f}" y="{PAD_T + ph + 14}" text-anchor="middle">{t}</text>')
    out.append(f'<text x="{ox + PAD_L + pw / 2}" y="{H - 8}" text-anchor="middle">tokens (T)</text>')
    for v, label in targets:
        out.append(f'<line x1="{ox + PAD_L}" y1="{y_at(v):.1f}" x2="{ox + PAD_L + pw}" y2="{y_at(v):.1f}" '
                   f'stroke="#2ca02c" stroke-dasharray="5 3"/>')
        out.append(f'<text x="{ox + PAD_L + pw - 2}" y="{y_at(v) - 3:.1f}" text-anchor="end" fill="#2ca02c">{label}</text>')
    for name in names:
        pts = [(t, data[t][name]) for t in ts if data.get(t, {}).get(name)]
        if not pts:
            continue
        color = COLORS[name]
        line = " ".join(f"{x_at(t):.1f},{y_at(statistics.median(v)):.1f}" for t, v in pts)
        out.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2"/>')
        for t, v in pts:
            x = x_at(t)
            out.append(f'<line x1="{x:.1f}" y1="{y_at(min(v)):.1f}" x2="{x:.1f}" y2="{y_at(max(v)):.1f}" stroke="{color}" stroke-width="1"/>')
            out.append(f'<circle cx="{x:.1f}" cy="{y_at(statistics.median(v)):.1f}" r="2.5" fill="{color}"/>')
    return out


def render(doc, title):
    share, speed = series(doc)
    if not share:
        raise SystemExit("no rows with an int8 time in the input")
    ts_share = sorted(t for t in share if t <= 256)
    ts_speed = sorted(speed)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H + 24}" font-family="sans-serif" font-size="10">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{W}" y="14" text-anchor="middle" font-size="13">{title}</text>',
             '<g transform="translate(0,10)">']
    parts += panel(0, "share of the HBM read ceiling (T &lt;= 256)", share, ("int8", "bf16", "torch"), 1.0, 0.2,
                   lambda v: f"{100 * v:.0f}%", [(0.85, "85% target")], ts_share)
    top = max(2.0, math.ceil(max(max(v) for d in speed.values() for v in d.values() if v) * 2) / 2)
    parts += panel(W, "int8 speedup (time of the other / int8 time)", speed, ("bf16", "torch"), top, 0.5,
                   lambda v: f"{v:.1f}x", [(1.7, "1.7x target (T 1-64, vs bf16)"), (1.0, "1.0x")], ts_speed)
    x, y = 12, H + 4
    for name, label in (("int8", "int8 (share)"), ("bf16", "bf16 entry: share / int8's speedup over it"),
                        ("torch", "torch._grouped_mm: share / int8's speedup over it")):
        parts.append(f'<line x1="{x}" y1="{y}" x2="{x + 16}" y2="{y}" stroke="{COLORS[name]}" stroke-width="2"/>')
        parts.append(f'<text x="{x + 20}" y="{y + 3}">{label}</text>')
        x += 40 + int(len(label) * 5.2)
    parts += ["</g>", "</svg>"]
    return "\n".join(parts) + "\n"


def main():
    if len(sys.argv) < 3:
        raise SystemExit('usage: python3 bench/kernels/w8a16_chart.py results.json[.gz] out.svg ["title"]')
    doc = load(sys.argv[1])
    title = sys.argv[3] if len(sys.argv) > 3 else f"W8A16 grouped GEMM, {doc['device']}, {doc['date_utc']} UTC"
    svg = render(doc, title)  # before the file is opened: a refused input leaves no empty chart behind
    with open(sys.argv[2], "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
